//! Metric names of the stages (all of them, in one place). Stage-specific counters carry a
//! bounded `reason` label; generic per-stage metrics live in `ctxd-pipeline`.

/// Counter: files the watcher reported (scan and events), label `origin` = scan|event|listing.
pub const WATCH_FILES_TOTAL: &str = "ctxd_watch_files_total";
/// Counter: paths the watcher skipped, label `reason` = ignored|binary_ext|secret|not_file|unsafe_key|too_large|unchanged.
pub const WATCH_SKIPPED_TOTAL: &str = "ctxd_watch_skipped_total";
/// Counter: blobs a git source's mirror dropped because no indexed ref holds them any more.
pub const GIT_MIRROR_REMOVED_TOTAL: &str = "ctxd_watch_git_mirror_removed_blobs_total";
/// Counter: listings of an object-storage source.
pub const OBJECT_LISTINGS_TOTAL: &str = "ctxd_object_listings_total";
/// Counter: objects downloaded into the mirror.
pub const OBJECT_DOWNLOADS_TOTAL: &str = "ctxd_object_downloads_total";
/// Counter: bytes downloaded from object storage.
pub const OBJECT_DOWNLOADED_BYTES_TOTAL: &str = "ctxd_object_downloaded_bytes_total";
/// Counter: objects deleted between their listing and their download.
pub const OBJECT_VANISHED_TOTAL: &str = "ctxd_object_vanished_total";
/// Counter: event notifications of an object-storage source read from its queue, label
/// `outcome` = applied|duplicate|stale|ignored ([`crate::object_events`]).
pub const OBJECT_EVENTS_TOTAL: &str = "ctxd_object_events_total";
/// Counter: files the loader skipped, label `reason` = unchanged|binary|too_large|vanished.
pub const LOAD_SKIPPED_TOTAL: &str = "ctxd_load_skipped_total";
/// Counter: files or parts of files that did not parse as their format, label `format` =
/// json|toml|pdf|pdf_page|notebook (json/toml are then indexed as plain text).
pub const LOAD_INVALID_TOTAL: &str = "ctxd_load_invalid_total";
/// Counter: files decoded lossily because they were not valid UTF-8.
pub const LOAD_LOSSY_UTF8_TOTAL: &str = "ctxd_load_lossy_utf8_total";
/// Counter: bytes read by the loader.
pub const LOAD_BYTES_TOTAL: &str = "ctxd_load_bytes_total";
/// Counter: chunks produced, label `method` = tree_sitter|window.
pub const CHUNK_CHUNKS_TOTAL: &str = "ctxd_chunk_chunks_total";
/// Counter: bytes read from files streamed in parts (progress of huge files).
pub const CHUNK_STREAM_BYTES_TOTAL: &str = "ctxd_chunk_stream_bytes_total";
/// Counter: parts of streamed files produced.
pub const CHUNK_STREAM_PARTS_TOTAL: &str = "ctxd_chunk_stream_parts_total";
/// Counter: chunk tokens produced.
pub const CHUNK_TOKENS_TOTAL: &str = "ctxd_chunk_tokens_total";
/// Counter: chunks embedded by the model.
pub const EMBED_CHUNKS_TOTAL: &str = "ctxd_embed_chunks_total";
/// Counter: chunks whose vector was reused from the index (content unchanged).
pub const EMBED_CACHE_HITS_TOTAL: &str = "ctxd_embed_cache_hits_total";
/// Counter: chunks that had to be embedded.
pub const EMBED_CACHE_MISSES_TOTAL: &str = "ctxd_embed_cache_misses_total";
/// Counter: chunks stored without a vector (full-text-only sources).
pub const EMBED_SKIPPED_CHUNKS_TOTAL: &str = "ctxd_embed_skipped_chunks_total";
/// Counter: files committed to the index.
pub const UPSERT_FILES_TOTAL: &str = "ctxd_upsert_files_total";
/// Counter: files removed from the index.
pub const UPSERT_REMOVED_TOTAL: &str = "ctxd_upsert_removed_files_total";
/// Counter: commit attempts that failed and were retried.
pub const UPSERT_RETRIES_TOTAL: &str = "ctxd_upsert_retries_total";

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates the series the dashboards read at zero (commits, removals, embedding cache). Called by the binary once the recorder is installed.
pub fn describe() {
    // The series the dashboards read exist from the first scrape, at zero.
    for name in [UPSERT_FILES_TOTAL, UPSERT_REMOVED_TOTAL, EMBED_CACHE_HITS_TOTAL, EMBED_CACHE_MISSES_TOTAL] {
        metrics::counter!(name).increment(0);
    }
    metrics::describe_counter!(
        WATCH_FILES_TOTAL,
        "Files the watcher reported (scan and events), label origin = scan|event|listing."
    );
    metrics::describe_counter!(
        WATCH_SKIPPED_TOTAL,
        "Paths the watcher skipped, label reason = ignored|binary_ext|secret|not_file|unsafe_key|too_large|unchanged (a late event for a file that looks as reported)."
    );
    metrics::describe_counter!(
        GIT_MIRROR_REMOVED_TOTAL,
        "Blobs a git source's mirror dropped because no indexed ref holds them any more."
    );
    metrics::describe_counter!(OBJECT_LISTINGS_TOTAL, "Listings of an object-storage source.");
    metrics::describe_counter!(OBJECT_DOWNLOADS_TOTAL, "Objects downloaded into the mirror.");
    metrics::describe_counter!(OBJECT_DOWNLOADED_BYTES_TOTAL, "Bytes downloaded from object storage.");
    metrics::describe_counter!(OBJECT_VANISHED_TOTAL, "Objects deleted between their listing and their download.");
    metrics::describe_counter!(
        OBJECT_EVENTS_TOTAL,
        "Event notifications of an object-storage source read from its SQS queue, by outcome (applied, duplicate, stale, ignored)."
    );
    metrics::describe_counter!(
        LOAD_SKIPPED_TOTAL,
        "Files the loader skipped, label reason = unchanged|binary|too_large|vanished."
    );
    metrics::describe_counter!(LOAD_INVALID_TOTAL, "Files or parts of files that did not parse as their format, label format = json|toml|pdf|pdf_page|notebook (json/toml are then indexed as plain text).");
    metrics::describe_counter!(LOAD_LOSSY_UTF8_TOTAL, "Files decoded lossily because they were not valid UTF-8.");
    metrics::describe_counter!(LOAD_BYTES_TOTAL, "Bytes read by the loader.");
    metrics::describe_counter!(CHUNK_CHUNKS_TOTAL, "Chunks produced, label method = tree_sitter|window.");
    metrics::describe_counter!(
        CHUNK_STREAM_BYTES_TOTAL,
        "Bytes read from files streamed in parts (progress of huge files)."
    );
    metrics::describe_counter!(CHUNK_STREAM_PARTS_TOTAL, "Parts of streamed files produced.");
    metrics::describe_counter!(CHUNK_TOKENS_TOTAL, "Chunk tokens produced.");
    metrics::describe_counter!(EMBED_CHUNKS_TOTAL, "Chunks embedded by the model.");
    metrics::describe_counter!(
        EMBED_CACHE_HITS_TOTAL,
        "Chunks whose vector was reused from the index (content unchanged)."
    );
    metrics::describe_counter!(EMBED_CACHE_MISSES_TOTAL, "Chunks that had to be embedded.");
    metrics::describe_counter!(EMBED_SKIPPED_CHUNKS_TOTAL, "Chunks stored without a vector (full-text-only sources).");
    metrics::describe_counter!(UPSERT_FILES_TOTAL, "Files committed to the index.");
    metrics::describe_counter!(UPSERT_REMOVED_TOTAL, "Files removed from the index.");
    metrics::describe_counter!(UPSERT_RETRIES_TOTAL, "Commit attempts that failed and were retried.");
}
