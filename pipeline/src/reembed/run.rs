//! Running a re-embedding job on one machine: [`reembed`] (passes until the target holds every
//! source row, indexes, the switch; with `commit_shards`, after publishing what the shards of a
//! distributed job staged). The steps are in the module docs of [`super`].

use std::collections::HashSet;
use std::time::Instant;

use ctxd_index::active;
use ctxd_models::service::EmbedService;

use super::job::{job_error, open_job, Job, JobModel, Progress, ReembedOptions, ReembedReport, SOURCE_TAG};
use super::pass::{pass, Rows, Sink};
use super::shard::{drop_shard_tags, publish};
use crate::error::PipelineError;

/// Re-embeds the index at `db` with `service` (its model loaded from `model_spec`) into the
/// model's own table and, with `opts.switch`, makes that table the active one; with
/// `opts.commit_shards` (`ctxd reembed --commit`) it first publishes the fragments every shard of
/// a distributed job wrote ([`super::shard`]) in one commit, then catches up on what changed
/// since the shards read.
pub async fn reembed(
    db: &str,
    service: EmbedService,
    model_spec: &str,
    opts: &ReembedOptions,
    progress: &dyn Progress,
) -> Result<ReembedReport, PipelineError> {
    run(db, service.into(), model_spec, opts, progress).await
}

/// The job: the shards' staged fragments published when `opts.commit_shards`, then passes until
/// the target holds every source row, then indexes and, with `opts.switch`, the switch.
pub(crate) async fn run(
    db: &str,
    model: JobModel,
    model_spec: &str,
    opts: &ReembedOptions,
    progress: &dyn Progress,
) -> Result<ReembedReport, PipelineError> {
    let started = Instant::now();
    let (to_model, dim) = (model.id.clone(), model.dim);
    let Job { source, to_table, target } = open_job(db, &model, true).await?;
    let mut report = ReembedReport {
        from_table: source.table_name().to_string(),
        from_model: source.model_id().to_string(),
        to_table: to_table.clone(),
        to_model: to_model.clone(),
        ..Default::default()
    };
    if opts.commit_shards {
        (report.shards, report.staged_rows) = publish(db, &source, &target, &to_table).await?;
    }
    tracing::info!(
        from = %report.from_table, to = %to_table, model = %to_model,
        "re-embedding: streaming the source into the target"
    );
    let job = Job { source, to_table, target };
    let mut round = 0;
    loop {
        let Pending { todo, total, removed } = pending(&job).await?;
        report.rows = total;
        if round == 0 {
            report.resumed = total - todo.len();
        }
        report.removed += removed;
        if todo.is_empty() {
            break;
        }
        if round > opts.max_catch_up_rounds {
            return Err(job_error(
                db,
                format!(
                    "the source still differs by {} rows after {} catch-up rounds; run `ctxd reembed` again when writes slow down",
                    todo.len(),
                    opts.max_catch_up_rounds
                ),
            ));
        }
        let phase = if round == 0 { "re-embedding" } else { "catching up" };
        progress.start(phase, total as u64, (total - todo.len()) as u64);
        let rows = rows_to_read(todo, total);
        let (source, target) = (&job.source, &job.target);
        report.embedded +=
            pass(source, target, &model, rows, opts.rows_per_block, Sink::Commit, progress).await?.embedded;
        if round > 0 {
            report.catch_up_rounds = round;
        }
        round += 1;
    }
    let Job { source, to_table, target } = job;
    source.snapshots().untag(SOURCE_TAG).await?;
    // Shards' source tags go (one killed for good, a run with another N); a job finished on one
    // machine drops what shards staged for this table too (`publish` cleared it otherwise).
    if !opts.commit_shards {
        ctxd_index::staged::clear(db, &to_table).await?;
    }
    drop_shard_tags(&source).await;
    target.maintenance().build_fts().await?;
    target.maintenance().maintain(&opts.maintenance).await?;
    report.version = target.version().await?;
    if opts.switch {
        active::switch(db, &to_table, &to_model, model_spec, dim).await?;
        report.switched = true;
        tracing::info!(table = %to_table, model = %to_model, "re-embedding: switched queries to the new table");
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.rows_per_second = report.embedded as f64 / report.seconds.max(1e-9);
    Ok(report)
}

/// What a pass still has to do: the source's chunk ids the target lacks, of `total` source
/// rows; `removed` rows of the target that the source no longer has were deleted.
struct Pending {
    todo: HashSet<String>,
    total: usize,
    removed: usize,
}

/// Compares the target with the source as it is now (the version read tagged so no cleanup
/// removes it while a pass reads it), deleting what the target holds twice (two jobs on one
/// target both appended it: redone once) or no longer needs.
async fn pending(job: &Job) -> Result<Pending, PipelineError> {
    let Job { source, to_table, target } = job;
    source.refresh().await?;
    // The version this pass reads stays on disk while it reads, however long that takes
    // (a daemon's cleanup removes untagged versions older than `retain_versions_secs`).
    source.snapshots().tag(SOURCE_TAG, None).await?;
    target.refresh().await?;
    // Two jobs on one target (two writers migrating the same old index at once) both append
    // what neither had: such ids are held twice. They are deleted and done again, once.
    let (mut done, twice) = target.reads().chunk_ids_and_duplicates().await?;
    if !twice.is_empty() {
        tracing::warn!(table = %to_table, rows = twice.len(), "re-embedding: chunks written twice by concurrent jobs; redoing them");
        target.writes().delete_chunk_ids(&twice).await?;
        twice.iter().for_each(|id| {
            done.remove(id);
        });
    }
    let src = source.reads().chunk_ids().await?;
    let extra: Vec<String> = done.difference(&src).cloned().collect();
    let todo: HashSet<String> = src.difference(&done).cloned().collect();
    if !extra.is_empty() {
        target.writes().delete_chunk_ids(&extra).await?;
    }
    Ok(Pending { todo, total: src.len(), removed: extra.len() })
}

/// A first pass with most rows to do scans the table; small sets are fetched by id.
fn rows_to_read(todo: HashSet<String>, total: usize) -> Rows {
    if todo.len() * 2 > total {
        Rows::Scan(todo)
    } else {
        let mut ids: Vec<String> = todo.into_iter().collect();
        ids.sort_unstable();
        Rows::ById(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::super::job::Quiet;
    use super::*;
    use crate::testkit::{letters, row, text_len, Letters};
    use ctxd_index::{schema::ChunkRow, store::Index, writer::CommitBatch, NO_MODEL};
    use ctxd_models::service::EmbedServiceConfig;

    struct Count(std::sync::atomic::AtomicU64);
    impl Progress for Count {
        fn start(&self, _: &str, _: u64, _: u64) {}
        fn advance(&self, n: u64) {
            self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_job_resumes_catches_up_switches_and_refuses_the_same_model() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db").to_string_lossy().into_owned();
        let old = Index::open_or_create(&db, "test/old", 4).await.unwrap();
        let mut rows: Vec<ChunkRow> = (0..40).map(|i| row(i, "test/old")).collect();
        rows[5].model = NO_MODEL.into(); // a text-only row
        rows[5].vector = vec![0.0; 4];
        old.writes().commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        let service = || EmbedService::spawn(Letters, EmbedServiceConfig::default());
        let opts = ReembedOptions { rows_per_block: 7, switch: false, ..Default::default() };

        // An interrupted earlier run: some rows done, one of them for a chunk gone since.
        let target = Index::open_or_create_table(&db, "chunks__test-letters", "test/letters", 6).await.unwrap();
        let mut done: Vec<ChunkRow> = (10..20)
            .map(|i| ChunkRow { vector: letters(row(i, "").content.len()), ..row(i, "test/letters") })
            .collect();
        let mut gone = done[0].clone();
        gone.chunk.chunk_id = "gone".into();
        done.push(gone);
        target.writes().commit(CommitBatch { rows: done, ..Default::default() }).await.unwrap();

        let count = Count(Default::default());
        let report = reembed(&db, service(), "test/letters", &opts, &count).await.unwrap();
        assert_eq!(report.to_table, "chunks__test-letters");
        assert_eq!((report.rows, report.resumed, report.embedded, report.removed), (40, 10, 30, 1));
        assert_eq!(count.0.load(std::sync::atomic::Ordering::Relaxed), 30);
        assert!(!report.switched);
        assert_eq!(Index::open(&db).await.unwrap().table_name(), "chunks", "not switched");

        // The source changed since (a daemon's commit): the next run only catches up, and switches.
        let mut changed = row(41, "test/old");
        changed.chunk.path = "src/f0.rs".into();
        old.writes()
            .commit(CommitBatch { rows: vec![changed], replace_paths: vec!["src/f0.rs".into()], ..Default::default() })
            .await
            .unwrap();
        let report = reembed(
            &db,
            service(),
            "test/letters",
            &ReembedOptions { switch: true, ..opts.clone() },
            &Count(Default::default()),
        )
        .await
        .unwrap();
        assert_eq!((report.rows, report.embedded, report.removed), (37, 1, 4));
        assert!(report.switched);

        let now = Index::open(&db).await.unwrap();
        assert_eq!((now.table_name(), now.model_id(), now.dim()), ("chunks__test-letters", "test/letters", 6));
        assert_eq!(now.reads().chunk_ids().await.unwrap(), old.reads().chunk_ids().await.unwrap());
        let ids: Vec<String> = vec!["c007".into(), "c005".into()];
        let vectors = now.vectors().vectors_of_chunks(&ids).await.unwrap();
        assert_eq!(vectors["c007"], letters(text_len(7)), "embedded from chunk_text, not the bare content");
        assert!(!vectors.contains_key("c005"), "the text-only row stays without a vector (model none)");
        let hits = now.reads().vector_search(&letters(text_len(9)), 3).await.unwrap();
        assert!(hits.iter().all(|h| h.chunk_id != "c005"));
        assert!(hits[0].score > 0.99, "{hits:?}");
        // Full-text search works on the new table.
        assert!(!now.reads().fts_search("item_12", 3).await.unwrap().is_empty());
        let history = ctxd_index::active::history(&db).await.unwrap();
        assert_eq!(history.len(), 2);
        let tagged = old.snapshots().list().await.unwrap().into_iter().any(|s| s.tags.iter().any(|t| t == SOURCE_TAG));
        assert!(!tagged, "the source version tag is dropped when the job is done");
        assert_eq!((history[0].table_name.as_str(), history[0].model_spec.as_str()), ("chunks", ""));

        let err = reembed(&db, service(), "test/letters", &opts, &Quiet).await.unwrap_err().to_string();
        assert!(err.contains("already uses model 'test/letters'"), "{err}");
    }
}
