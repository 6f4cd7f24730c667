//! Re-embedding jobs: every chunk of an index embedded again by another model, written to a
//! second chunks table while the first keeps serving, then an atomic switch.
//!
//! `ctxd reembed --db DIR --model MODEL` runs [`reembed`]:
//!
//! 1. **Target table.** The active table ([`ctxd_index::active`]) is the source. The target is
//!    `chunks__<model-slug>`, or the table an earlier switch used for the same model (switching
//!    back re-uses it and only catches up). The first job records the current table in the
//!    pointer's history (seq 0), so every model the index ever had is found again.
//! 2. **Streaming pass.** A three-task graph with bounded edges (`reembed_read →
//!    reembed_embed → reembed_write`, the generic stage metrics and back-pressure of
//!    [`crate::graph`]): the reader streams the source rows *without* their vectors in blocks,
//!    the embedder sends each block's texts to the model thread (batched by tokens there,
//!    identical texts embedded once), the writer appends each block to the target as one
//!    commit. Memory is a few blocks whatever the table's size.
//! 3. **Resumable.** Chunk ids are stable (blake3 of path, line range and content hash), so a job
//!    that was interrupted skips every id the target already holds: `ctxd reembed` again
//!    continues where it stopped (lost work: at most the blocks in flight). Ids in the target
//!    that are gone from the source are deleted.
//! 4. **Catch-up.** A daemon keeps committing to the source during the job; the job repeats the
//!    id diff until it is empty (or `max_catch_up_rounds`), then builds the target's indexes
//!    (full-text, B-trees, the vector index once large enough).
//! 5. **Switch.** One commit to the pointer table. Readers opening the index afterwards use the
//!    new table and model; a running daemon notices within seconds, loads the new model,
//!    re-opens its writer on the new table (its start-up reconciliation indexes whatever
//!    changed between the last catch-up and the switch) and then swaps its searcher — queries
//!    are answered by the old table and model until that moment, never by a half-filled table.
//!
//! Every row is embedded from [`ctxd_models::chunk_text`] (path, symbol and content: the text the
//! indexer embeds) and stored with its [`ctxd_models::embed_key`], so an index moved to model B
//! holds the vectors a fresh index built with B would hold.
//!
//! **Migration** ([`migrate`]): a table written by an older ctxd has no `embed_key` column and
//! vectors cached by content alone (some may be of another text than their row's). A writer
//! ([`crate::daemon::Engine::open`]) re-embeds such a table once with its own model, by the
//! same job into a new keyed table and the same switch, with a log line saying so; queries keep
//! using the old table until the switch, so old and new vectors are never mixed.
//!
//! While a pass reads, the source version it reads is tagged `ctxd-reembed-source` so that no cleanup
//! removes it under a long job; the tag is dropped at the end. The source table is left as it is (the rollback: `ctxd reembed` back to the old model
//! only catches up). Rows stored without a vector (`model = "none"`, full-text-only sources)
//! are copied with a zero vector of the new dimension.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use ctxd_index::store::typed_col;
use ctxd_index::{active, Index, IndexError, MaintenanceOptions, NO_MODEL};
use ctxd_models::EmbedService;
use futures::StreamExt;

use crate::graph::{edge, Input, Output};
use crate::metrics as m;
use crate::PipelineError;

/// How a job runs.
#[derive(Debug, Clone)]
pub struct ReembedOptions {
    /// Rows per block (one embed request, one commit to the target).
    pub rows_per_block: usize,
    /// Switch queries to the new table when done (false: prepare only; run again to switch).
    pub switch: bool,
    /// Catch-up rounds before giving up on a source that keeps changing.
    pub max_catch_up_rounds: usize,
    /// Maintenance of the finished target (vector index threshold, version retention).
    pub maintenance: MaintenanceOptions,
}

impl Default for ReembedOptions {
    fn default() -> Self {
        Self {
            rows_per_block: 256,
            switch: true,
            max_catch_up_rounds: 5,
            maintenance: MaintenanceOptions {
                retain: std::time::Duration::from_secs(3600),
                single_writer: false,
                vector_index_min_rows: 100_000,
            },
        }
    }
}

/// Progress callbacks (the CLI drives an indicatif bar with them).
pub trait Progress: Send + Sync {
    /// A pass over `total` rows starts, `done` of them already in the target.
    fn start(&self, phase: &str, total: u64, done: u64);
    /// `n` more rows are in the target.
    fn advance(&self, n: u64);
}

/// No progress output.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: &str, _: u64, _: u64) {}
    fn advance(&self, _: u64) {}
}

/// What a job did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReembedReport {
    pub from_table: String,
    pub from_model: String,
    pub to_table: String,
    pub to_model: String,
    /// Rows of the source at the end.
    pub rows: usize,
    /// Rows embedded and written by this run.
    pub embedded: u64,
    /// Rows found already done (an earlier, interrupted run).
    pub resumed: usize,
    /// Target rows deleted because the source no longer has them.
    pub removed: usize,
    /// Diff rounds after the first pass.
    pub catch_up_rounds: usize,
    pub seconds: f64,
    pub rows_per_second: f64,
    /// Whether queries now use the target.
    pub switched: bool,
    /// The target's LanceDB version at the end.
    pub version: u64,
}

/// Tag on the source version a pass reads (removed when the job is done).
pub const SOURCE_TAG: &str = "ctxd-reembed-source";

fn job_error(db: &str, message: impl Into<String>) -> PipelineError {
    PipelineError::Reembed { db: db.to_string(), message: message.into() }
}

/// The model a job embeds with: its id and dimension, and the service (`None` for a
/// full-text-only index, whose rows have no vectors to compute).
#[derive(Clone)]
pub struct JobModel {
    pub id: String,
    pub dim: usize,
    pub service: Option<EmbedService>,
}

impl From<EmbedService> for JobModel {
    fn from(service: EmbedService) -> Self {
        Self { id: service.model_id().to_string(), dim: service.dim(), service: Some(service) }
    }
}

/// Re-embeds the index at `db` with `service` (its model loaded from `model_spec`) into the
/// model's own table and, with `opts.switch`, makes that table the active one.
pub async fn reembed(
    db: &str,
    service: EmbedService,
    model_spec: &str,
    opts: &ReembedOptions,
    progress: &dyn Progress,
) -> Result<ReembedReport, PipelineError> {
    run(db, service.into(), model_spec, opts, progress).await
}

/// Re-embeds the active table at `db` once with `model` when it was written by an older ctxd
/// (no `embed_key` column, see the module docs) and switches to the result; `None` when the
/// table is keyed already. Logs what it does.
pub async fn migrate(db: &str, model: JobModel, model_spec: &str) -> Result<Option<ReembedReport>, PipelineError> {
    let source = Index::open(db).await?;
    if source.embed_keyed() {
        return Ok(None);
    }
    let rows = source.stats().await?.rows;
    tracing::warn!(
        db, table = %source.table_name(), rows, model = %model.id,
        "the index was written by an older ctxd: its vectors are keyed by content alone, so a moved file or an \
         earlier re-embedding may hold vectors of another text; re-embedding all {rows} chunks once into a keyed \
         table (queries keep using the old table until the switch)"
    );
    let report = match run(db, model.clone(), model_spec, &ReembedOptions::default(), &Quiet).await {
        Ok(report) => report,
        // Another writer migrated it meanwhile (the pointer now names a keyed table).
        Err(_) if Index::open(db).await.is_ok_and(|now| now.embed_keyed() && now.model_id() == model.id) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    tracing::info!(
        db, from = %report.from_table, to = %report.to_table, rows = report.rows, seconds = report.seconds,
        "index migrated: every vector is now the model's vector of its row's text"
    );
    Ok(Some(report))
}

/// The table a job for `model` (dimension `dim`) writes: the one an earlier switch used for
/// it, else `chunks__<model-slug>` (`-2`, `-3`, … when that name is taken by the source or by a
/// table of an older ctxd). Never the source, never a table without `embed_key`.
async fn target_table(
    db: &str,
    history: &[active::ActiveTable],
    source: &str,
    model: &str,
    dim: usize,
) -> Result<String, PipelineError> {
    let base = active::table_for_model(model);
    let earlier = history.iter().rev().filter(|r| r.model_id == model && r.dim == dim).map(|r| r.table_name.clone());
    let fresh = std::iter::once(base.clone()).chain((2..10).map(|n| format!("{base}-{n}")));
    for name in earlier.chain(fresh) {
        if name == source {
            continue;
        }
        match Index::open_table(db, &name).await {
            Err(IndexError::Missing { .. }) => return Ok(name),
            Ok(table) if table.embed_keyed() => return Ok(name),
            Ok(_) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(job_error(db, format!("no free table name for model '{model}' ({base}, {base}-2 … {base}-9 are taken)")))
}

async fn run(
    db: &str,
    model: JobModel,
    model_spec: &str,
    opts: &ReembedOptions,
    progress: &dyn Progress,
) -> Result<ReembedReport, PipelineError> {
    let started = Instant::now();
    let source = Index::open(db).await?;
    let (to_model, dim) = (model.id.clone(), model.dim);
    if source.model_id() == to_model && source.embed_keyed() {
        return Err(job_error(
            db,
            format!("the index already uses model '{to_model}' (table {}); nothing to re-embed", source.table_name()),
        ));
    }
    let mut history = active::history(db).await?;
    if history.is_empty() {
        // Record what is in force now, so switching back finds this table again (with no spec:
        // whatever built the index is configured already).
        history.push(active::switch(db, source.table_name(), source.model_id(), "", source.dim()).await?);
    }
    let to_table = target_table(db, &history, source.table_name(), &to_model, dim).await?;
    let target = Index::open_or_create_table(db, &to_table, &to_model, dim).await.map_err(|e| match e {
        IndexError::ModelMismatch { indexed, indexed_dim, .. } => job_error(
            db,
            format!(
                "table {to_table} holds vectors of '{indexed}' (dim {indexed_dim}), not '{to_model}' (dim {dim}); drop it or pick another model"
            ),
        ),
        e => e.into(),
    })?;
    let mut report = ReembedReport {
        from_table: source.table_name().to_string(),
        from_model: source.model_id().to_string(),
        to_table: to_table.clone(),
        to_model: to_model.clone(),
        ..Default::default()
    };
    tracing::info!(
        from = %report.from_table, to = %to_table, model = %to_model,
        "re-embedding: streaming the source into the target"
    );
    let mut round = 0;
    loop {
        source.refresh().await?;
        // The version this pass reads stays on disk while it reads, however long that takes
        // (a daemon's cleanup removes untagged versions older than `retain_versions_secs`).
        source.tag(SOURCE_TAG, None).await?;
        target.refresh().await?;
        // Two jobs on one target (two writers migrating the same old index at once) both append
        // what neither had: such ids are held twice. They are deleted and done again, once.
        let (mut done, twice) = target.chunk_ids_and_duplicates().await?;
        if !twice.is_empty() {
            tracing::warn!(table = %to_table, rows = twice.len(), "re-embedding: chunks written twice by concurrent jobs; redoing them");
            target.delete_chunk_ids(&twice).await?;
            twice.iter().for_each(|id| {
                done.remove(id);
            });
        }
        let src = source.chunk_ids().await?;
        let extra: Vec<String> = done.difference(&src).cloned().collect();
        let todo: HashSet<String> = src.difference(&done).cloned().collect();
        report.rows = src.len();
        if round == 0 {
            report.resumed = src.len() - todo.len();
        }
        if !extra.is_empty() {
            target.delete_chunk_ids(&extra).await?;
            report.removed += extra.len();
        }
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
        progress.start(phase, src.len() as u64, (src.len() - todo.len()) as u64);
        // A first pass with most rows to do scans the table; small sets are fetched by id.
        let rows = if todo.len() * 2 > src.len() {
            Rows::Scan(todo)
        } else {
            let mut ids: Vec<String> = todo.into_iter().collect();
            ids.sort_unstable();
            Rows::ById(ids)
        };
        report.embedded += pass(&source, &target, &model, rows, opts.rows_per_block, progress).await?;
        if round > 0 {
            report.catch_up_rounds = round;
        }
        round += 1;
    }
    source.untag(SOURCE_TAG).await?;
    target.build_fts().await?;
    target.maintain(&opts.maintenance).await?;
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

/// The source rows a pass copies.
enum Rows {
    /// These ids, fetched by id (a few).
    ById(Vec<String>),
    /// The rows with these ids, found by scanning the table (most of it).
    Scan(HashSet<String>),
}

/// One pass: `rows` from `source` into `target`. Returns the rows written.
async fn pass(
    source: &Index,
    target: &Index,
    model: &JobModel,
    rows: Rows,
    rows_per_block: usize,
    progress: &dyn Progress,
) -> Result<u64, PipelineError> {
    let (to_embed, embed_in) = edge::<RecordBatch>("reembed_read", "reembed_embed", 2);
    let (to_write, write_in) = edge::<RecordBatch>("reembed_embed", "reembed_write", 2);
    let rows_per_block = rows_per_block.max(1);
    let read = read(source, rows, rows_per_block, to_embed);
    let embed = embed(model, source.uri(), embed_in, to_write);
    let write = write(target, write_in, progress);
    let (r, e, w) = tokio::join!(read, embed, write);
    r?;
    e?;
    w
}

async fn read(
    source: &Index,
    rows: Rows,
    rows_per_block: usize,
    out: Output<RecordBatch>,
) -> Result<(), PipelineError> {
    let (parts, keep): (Vec<Option<&[String]>>, _) = match &rows {
        Rows::ById(ids) => (ids.chunks(500).map(Some).collect(), None),
        Rows::Scan(keep) => (vec![None], Some(keep)),
    };
    for part in parts {
        let mut stream = source.scan_without_vectors(part).await?;
        while let Some(batch) = stream.next().await {
            let mut batch = batch?;
            if let Some(keep) = keep {
                let ids = typed_col::<StringArray>(&batch, "chunk_id", source.uri())?;
                let mask: arrow_array::BooleanArray =
                    ids.iter().map(|id| Some(id.is_some_and(|id| keep.contains(id)))).collect();
                batch = arrow_select::filter::filter_record_batch(&batch, &mask).map_err(IndexError::from)?;
            }
            let mut offset = 0;
            while offset < batch.num_rows() {
                let len = rows_per_block.min(batch.num_rows() - offset);
                if out.send(batch.slice(offset, len)).await.is_err() {
                    return Ok(()); // the embedder failed; its error is reported
                }
                offset += len;
            }
        }
    }
    Ok(())
}

async fn embed(
    model: &JobModel,
    uri: &str,
    input: Input<RecordBatch>,
    out: Output<RecordBatch>,
) -> Result<(), PipelineError> {
    let dim = model.dim;
    while let Some(block) = input.recv().await {
        let started = Instant::now();
        let col = |name| typed_col::<StringArray>(&block, name, uri);
        let (paths, symbols, contents) = (col("path")?, col("symbol")?, col("content")?);
        let models = col("model").ok();
        // Identical texts are embedded once; rows without a vector are not embedded.
        let mut slot_of: HashMap<String, usize> = HashMap::new();
        let mut texts = Vec::new();
        let mut slots = Vec::with_capacity(block.num_rows());
        let mut keys = Vec::with_capacity(block.num_rows());
        for i in 0..block.num_rows() {
            let symbol = (!symbols.is_null(i)).then(|| symbols.value(i));
            let vectorless = models.is_some_and(|m| m.value(i) == NO_MODEL);
            let model_id = if vectorless { NO_MODEL } else { model.id.as_str() };
            let (text, key) = ctxd_models::keyed_chunk_text(model_id, paths.value(i), symbol, contents.value(i));
            keys.push(key);
            if vectorless {
                slots.push(None);
                continue;
            }
            let next = texts.len();
            let slot = *slot_of.entry(text).or_insert_with_key(|text| {
                texts.push(text.clone());
                next
            });
            slots.push(Some(slot));
        }
        let vectors = match (&model.service, texts.is_empty()) {
            (_, true) => Vec::new(),
            (Some(service), false) => service.embed(texts).await?,
            (None, false) => {
                return Err(job_error(
                    uri,
                    format!(
                        "{} rows hold vectors but no embedding model is loaded (a full-text-only source); \
                         run once with embedding on ([source] embed = true) to re-embed them",
                        texts.len()
                    ),
                ))
            }
        };
        let mut list = FixedSizeListBuilder::with_capacity(
            Float32Builder::with_capacity(block.num_rows() * dim),
            dim as i32,
            block.num_rows(),
        );
        let zero = vec![0.0f32; dim];
        for slot in &slots {
            let v = slot.map_or(&zero, |s| &vectors[s]);
            if v.len() != dim {
                return Err(IndexError::Dimension { expected: dim, got: v.len() }.into());
            }
            list.values().append_slice(v);
            list.append(true);
        }
        let model_col: StringArray =
            slots.iter().map(|s| Some(if s.is_some() { model.id.as_str() } else { NO_MODEL })).collect();
        let keys = StringArray::from(keys);
        let batch = with_vectors(&block, Arc::new(list.finish()), Arc::new(model_col), Arc::new(keys), dim, uri)?;
        metrics::histogram!(m::STAGE_PROCESSING_SECONDS, "stage" => "reembed_embed")
            .record(started.elapsed().as_secs_f64());
        if out.send(batch).await.is_err() {
            return Ok(());
        }
    }
    Ok(())
}

async fn write(target: &Index, input: Input<RecordBatch>, progress: &dyn Progress) -> Result<u64, PipelineError> {
    let mut written = 0u64;
    while let Some(batch) = input.recv().await {
        let n = batch.num_rows() as u64;
        target.append(batch).await?;
        written += n;
        metrics::counter!(m::REEMBED_ROWS_TOTAL).increment(n);
        progress.advance(n);
    }
    Ok(written)
}

/// The source block in the target's schema: every column as it was, `vector`, `model` and
/// `embed_key` new.
fn with_vectors(
    block: &RecordBatch,
    vector: ArrayRef,
    model: ArrayRef,
    key: ArrayRef,
    dim: usize,
    uri: &str,
) -> Result<RecordBatch, IndexError> {
    let schema = ctxd_index::schema::chunks_schema(dim);
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        columns.push(match field.name().as_str() {
            "vector" => vector.clone(),
            "model" => model.clone(),
            ctxd_index::schema::EMBED_KEY => key.clone(),
            name => block
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| IndexError::Column { uri: uri.to_string(), column: name.into() })?,
        });
    }
    Ok(RecordBatch::try_new(schema, columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxd_index::{ChunkRow, CommitBatch};
    use ctxd_models::{EmbedServiceConfig, Embedder, ModelError};

    /// A stand-in model (the job's logic is under test here; the end-to-end test uses two real
    /// checkpoints): dimension 6, the vector counts letters by `text.len() % 6` and is
    /// normalized, so each text's vector is fixed and rows can be checked.
    struct Letters;

    impl Embedder for Letters {
        fn model_id(&self) -> &str {
            "test/letters"
        }
        fn dim(&self) -> usize {
            6
        }
        fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
            Ok(texts.iter().map(|t| t.bytes().map(u32::from).collect()).collect())
        }
        fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
            Ok(ids.iter().map(|t| letters(t.len())).collect())
        }
    }

    fn letters(len: usize) -> Vec<f32> {
        let mut v = vec![0.1f32; 6];
        v[len % 6] = 1.0;
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn row(i: usize, model: &str) -> ChunkRow {
        let content = format!("fn item_{i}() {{ {} }}", "x".repeat(i % 7));
        ChunkRow {
            chunk_id: format!("c{i:03}"),
            path: format!("src/f{}.rs", i / 4),
            language: "rust".into(),
            symbol: Some(format!("item_{i}")),
            kind: Some("function".into()),
            start_line: 1,
            end_line: 1,
            content,
            content_hash: format!("h{i}"),
            embed_key: format!("k{i}-{model}"),
            file_hash: format!("fh{}", i / 4),
            token_count: 4,
            vector: vec![0.5; 4],
            model: model.into(),
        }
    }

    /// Length of the text the job embeds for `row(i, _)`.
    fn text_len(i: usize) -> usize {
        let r = row(i, "");
        ctxd_models::chunk_text(&r.path, r.symbol.as_deref(), &r.content).len()
    }

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
        old.commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        let service = || EmbedService::spawn(Letters, EmbedServiceConfig::default());
        let opts = ReembedOptions { rows_per_block: 7, switch: false, ..Default::default() };

        // An interrupted earlier run: some rows done, one of them for a chunk gone since.
        let target = Index::open_or_create_table(&db, "chunks__test-letters", "test/letters", 6).await.unwrap();
        let mut done: Vec<ChunkRow> = (10..20)
            .map(|i| ChunkRow { vector: letters(row(i, "").content.len()), ..row(i, "test/letters") })
            .collect();
        done.push(ChunkRow { chunk_id: "gone".into(), ..done[0].clone() });
        target.commit(CommitBatch { rows: done, ..Default::default() }).await.unwrap();

        let count = Count(Default::default());
        let report = reembed(&db, service(), "test/letters", &opts, &count).await.unwrap();
        assert_eq!(report.to_table, "chunks__test-letters");
        assert_eq!((report.rows, report.resumed, report.embedded, report.removed), (40, 10, 30, 1));
        assert_eq!(count.0.load(std::sync::atomic::Ordering::Relaxed), 30);
        assert!(!report.switched);
        assert_eq!(Index::open(&db).await.unwrap().table_name(), "chunks", "not switched");

        // The source changed since (a daemon's commit): the next run only catches up, and switches.
        let mut changed = row(41, "test/old");
        changed.path = "src/f0.rs".into();
        old.commit(CommitBatch { rows: vec![changed], replace_paths: vec!["src/f0.rs".into()], ..Default::default() })
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
        assert_eq!(now.chunk_ids().await.unwrap(), old.chunk_ids().await.unwrap());
        let ids: Vec<String> = vec!["c007".into(), "c005".into()];
        let vectors = now.vectors_of_chunks(&ids).await.unwrap();
        assert_eq!(vectors["c007"], letters(text_len(7)), "embedded from chunk_text, not the bare content");
        assert!(!vectors.contains_key("c005"), "the text-only row stays without a vector (model none)");
        let hits = now.vector_search(&letters(text_len(9)), 3).await.unwrap();
        assert!(hits.iter().all(|h| h.chunk_id != "c005"));
        assert!(hits[0].score > 0.99, "{hits:?}");
        // Full-text search works on the new table.
        assert!(!now.fts_search("item_12", 3).await.unwrap().is_empty());
        let history = ctxd_index::active::history(&db).await.unwrap();
        assert_eq!(history.len(), 2);
        let tagged = old.snapshots().await.unwrap().into_iter().any(|s| s.tags.iter().any(|t| t == SOURCE_TAG));
        assert!(!tagged, "the source version tag is dropped when the job is done");
        assert_eq!((history[0].table_name.as_str(), history[0].model_spec.as_str()), ("chunks", ""));

        let err = reembed(&db, service(), "test/letters", &opts, &Quiet).await.unwrap_err().to_string();
        assert!(err.contains("already uses model 'test/letters'"), "{err}");
    }

    /// A table as an older ctxd wrote it: the chunks schema without `embed_key`.
    async fn legacy_table(db: &str, rows: &[ChunkRow], dim: usize) {
        let batch = ctxd_index::schema::rows_to_batch(rows, dim).unwrap();
        let keep: Vec<usize> = (0..batch.num_columns())
            .filter(|&i| batch.schema().field(i).name() != ctxd_index::schema::EMBED_KEY)
            .collect();
        let batch = batch.project(&keep).unwrap();
        let conn = lancedb::connect(db).execute().await.unwrap();
        conn.create_table(ctxd_index::CHUNKS_TABLE, batch).execute().await.unwrap();
    }

    #[tokio::test]
    async fn an_unkeyed_table_is_migrated_once_and_refuses_writes_before() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db").to_string_lossy().into_owned();
        // Vectors as an older ctxd left them: the content's, whatever the path.
        let rows: Vec<ChunkRow> =
            (0..12).map(|i| ChunkRow { vector: letters(row(i, "").content.len()), ..row(i, "test/letters") }).collect();
        legacy_table(&db, &rows, 6).await;
        let old = Index::open(&db).await.unwrap();
        assert!(!old.embed_keyed());
        assert_eq!(old.fts_search("item_3", 2).await.unwrap().len(), 0, "searchable, no full-text index yet");
        assert!(old.vector_search(&letters(3), 2).await.is_ok(), "an old table still answers queries");
        let err = old.commit(CommitBatch { rows: vec![row(50, "test/letters")], ..Default::default() }).await;
        assert!(err.unwrap_err().to_string().contains("re-embed it once"), "writes are refused before migrating");

        // A concurrent job got there first and wrote rows 0..3 twice: they are redone, once.
        let early = Index::open_or_create_table(&db, "chunks__test-letters", "test/letters", 6).await.unwrap();
        for _ in 0..2 {
            let rows: Vec<ChunkRow> =
                (0..3).map(|i| ChunkRow { vector: letters(0), ..row(i, "test/letters") }).collect();
            early.commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        }
        assert_eq!(early.chunk_ids_and_duplicates().await.unwrap().1.len(), 3);
        let model = JobModel::from(EmbedService::spawn(Letters, EmbedServiceConfig::default()));
        let report = migrate(&db, model.clone(), "test/letters").await.unwrap().expect("migrated");
        assert_eq!((report.from_table.as_str(), report.to_table.as_str()), ("chunks", "chunks__test-letters"));
        assert_eq!((report.rows, report.embedded), (12, 12));
        let now = Index::open(&db).await.unwrap();
        assert!(now.embed_keyed());
        assert_eq!(now.table_name(), "chunks__test-letters");
        assert!(now.chunk_ids_and_duplicates().await.unwrap().1.is_empty());
        assert_eq!(now.stats().await.unwrap().rows, 12);
        let ids: Vec<String> = (0..12).map(|i| format!("c{i:03}")).collect();
        let vectors = now.vectors_of_chunks(&ids).await.unwrap();
        for i in 0..12 {
            assert_eq!(vectors[&ids[i]], letters(text_len(i)), "row {i} holds the vector of its own text");
        }
        // The key is the model and the text: the indexer's cache finds these rows.
        let r = row(4, "");
        let key =
            ctxd_models::embed_key("test/letters", &ctxd_models::chunk_text(&r.path, r.symbol.as_deref(), &r.content));
        assert_eq!(now.vectors_for(&[key.clone()]).await.unwrap()[&key], letters(text_len(4)));
        // Once is enough.
        assert!(migrate(&db, model, "test/letters").await.unwrap().is_none());
    }
}
