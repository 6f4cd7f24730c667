//! One streaming pass of a re-embedding job: a three-task pipeline with bounded queues
//! (`reembed_read → reembed_embed → reembed_write`, the generic stage metrics and back-pressure
//! of [`crate::stage_tasks`]). The reader streams the source rows *without* their vectors in blocks,
//! the embedder sends each block's texts to the model thread (identical texts embedded once,
//! rows without a vector copied without one: [`Vectorless`]), the writer appends each block to the
//! target as one commit — or, for a shard of a distributed job ([`Sink::Stage`]), gathers
//! blocks into uncommitted data fragments of the target ([`ctxd_index::fragments`]) that one
//! later commit publishes. Memory is a few blocks (a fragment's rows when staging) whatever the
//! table's size.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use ctxd_index::typed_col;
use ctxd_index::Fragments;
use ctxd_index::RowShare;
use ctxd_index::{error::IndexError, schema::Vectorless, store::Index, NO_MODEL};
use futures::StreamExt;

use super::job::{job_error, JobModel, Progress};
use crate::error::PipelineError;
use crate::metrics as m;
use crate::stage_tasks::{queue, Input, Output};

/// The source rows a pass copies.
pub(crate) enum Rows {
    /// These ids, fetched by id (a few).
    ById(Vec<String>),
    /// The rows with these ids, found by scanning the table (most of it).
    Scan(HashSet<String>),
    /// A shard's share of the table's rows ([`RowShare`], read alone), but those whose id is in
    /// the set (the target holds them already).
    Share(RowShare, HashSet<String>),
}

/// What a pass did: source rows read (before those already done were dropped), rows embedded
/// and written, and — when staging — the fragments they are in.
pub(crate) struct Passed {
    pub(crate) read: u64,
    pub(crate) embedded: u64,
    pub(crate) fragments: Fragments,
}

/// Where a pass writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sink {
    /// Each block appended as one commit (a job on one machine).
    Commit,
    /// Blocks gathered into uncommitted fragments of about this many rows (a shard).
    Stage { rows_per_fragment: usize },
}

/// One pass: `rows` from `source` into `target` (the fragments are empty with [`Sink::Commit`]).
pub(crate) async fn pass(
    source: &Index,
    target: &Index,
    model: &JobModel,
    rows: Rows,
    rows_per_block: usize,
    sink: Sink,
    progress: &dyn Progress,
) -> Result<Passed, PipelineError> {
    let (to_embed, embed_in) = queue::<RecordBatch>("reembed_read", "reembed_embed", 2);
    let (to_write, write_in) = queue::<RecordBatch>("reembed_embed", "reembed_write", 2);
    let rows_per_block = rows_per_block.max(1);
    let read = read(source, rows, rows_per_block, to_embed);
    let embed = embed(model, source.uri(), target.vectorless(), embed_in, to_write);
    let write = write(target, write_in, sink, progress);
    let (r, e, w) = tokio::join!(read, embed, write);
    let read = r?;
    e?;
    let (embedded, fragments) = w?;
    Ok(Passed { read, embedded, fragments })
}

/// Streams `rows` in blocks to the embedder; the rows it read from the source.
async fn read(
    source: &Index,
    rows: Rows,
    rows_per_block: usize,
    out: Output<RecordBatch>,
) -> Result<u64, PipelineError> {
    let mut read = 0u64;
    // What to read, one stream at a time; the ids to keep, the ids to drop.
    enum Part<'a> {
        Ids(&'a [String]),
        All,
        Share(&'a RowShare),
    }
    let (parts, keep, skip) = match &rows {
        Rows::ById(ids) => (ids.chunks(500).map(Part::Ids).collect(), None, None),
        Rows::Scan(keep) => (vec![Part::All], Some(keep), None),
        Rows::Share(share, done) => (vec![Part::Share(share)], None, Some(done)),
    };
    for part in parts {
        let mut stream = match part {
            Part::Ids(ids) => source.reads().scan_without_vectors(Some(ids)).await?,
            Part::All => source.reads().scan_without_vectors(None).await?,
            Part::Share(share) => source.vectors().scan_share_without_vectors(share).await?,
        };
        while let Some(batch) = stream.next().await {
            let mut batch = batch?;
            read += batch.num_rows() as u64;
            if keep.is_some() || skip.is_some_and(|s| !s.is_empty()) {
                let ids = typed_col::<StringArray>(&batch, "chunk_id", source.uri())?;
                let wanted = |id: &str| keep.is_none_or(|k| k.contains(id)) && skip.is_none_or(|s| !s.contains(id));
                let mask: arrow_array::BooleanArray = ids.iter().map(|id| Some(id.is_some_and(wanted))).collect();
                batch = arrow_select::filter::filter_record_batch(&batch, &mask).map_err(IndexError::from)?;
            }
            let mut offset = 0;
            while offset < batch.num_rows() {
                let len = rows_per_block.min(batch.num_rows() - offset);
                if out.send(batch.slice(offset, len)).await.is_err() {
                    return Ok(read); // the embedder failed; its error is reported
                }
                offset += len;
            }
        }
    }
    Ok(read)
}

async fn embed(
    model: &JobModel,
    uri: &str,
    vectorless: Vectorless,
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
        let (vectors, codes) = match (&model.service, texts.is_empty()) {
            (_, true) => (Vec::new(), Vec::new()),
            (Some(service), false) => match ctxd_stages::embed::late_codec(service) {
                Some(codec) => ctxd_stages::embed::embed_with_codes(service, &codec, texts).await?,
                None => (service.embed_documents(texts).await?, Vec::new()),
            },
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
        for slot in &slots {
            let v = slot.map(|s| vectors[s].as_slice());
            ctxd_index::schema::push_vector(&mut list, v, vectorless)
                .map_err(|got| IndexError::Dimension { expected: dim, got })?;
        }
        let model_col: StringArray =
            slots.iter().map(|s| Some(if s.is_some() { model.id.as_str() } else { NO_MODEL })).collect();
        let keys = StringArray::from(keys);
        // The target model's late-interaction codes, from the same pass (null where it has none).
        let late: arrow_array::BinaryArray =
            slots.iter().map(|s| s.and_then(|s| codes.get(s)).map(Vec::as_slice)).collect();
        let columns = (
            Arc::new(list.finish()) as ArrayRef,
            Arc::new(model_col) as ArrayRef,
            Arc::new(keys) as ArrayRef,
            Arc::new(late) as ArrayRef,
        );
        let batch = with_vectors(&block, columns, vectorless, dim, uri)?;
        metrics::histogram!(m::STAGE_PROCESSING_SECONDS, "stage" => "reembed_embed")
            .record(started.elapsed().as_secs_f64());
        if out.send(batch).await.is_err() {
            return Ok(());
        }
    }
    Ok(())
}

async fn write(
    target: &Index,
    input: Input<RecordBatch>,
    sink: Sink,
    progress: &dyn Progress,
) -> Result<(u64, Fragments), PipelineError> {
    let mut written = 0u64;
    let mut staged = Fragments::default();
    let mut pending: Vec<RecordBatch> = Vec::new();
    while let Some(batch) = input.recv().await {
        let n = batch.num_rows() as u64;
        match sink {
            Sink::Commit => target.writes().append(batch).await?,
            Sink::Stage { rows_per_fragment } => {
                pending.push(batch);
                if pending.iter().map(RecordBatch::num_rows).sum::<usize>() >= rows_per_fragment {
                    staged.extend(target.writes().write_fragments(std::mem::take(&mut pending)).await?);
                }
            }
        }
        written += n;
        metrics::counter!(m::REEMBED_ROWS_TOTAL).increment(n);
        progress.advance(n);
    }
    staged.extend(target.writes().write_fragments(pending).await?);
    Ok((written, staged))
}

/// The source block in the target's schema: every column as it was, `vector`, `model` and
/// `embed_key` and `late` new (the source's codes are of its model).
fn with_vectors(
    block: &RecordBatch,
    (vector, model, key, late): (ArrayRef, ArrayRef, ArrayRef, ArrayRef),
    vectorless: Vectorless,
    dim: usize,
    uri: &str,
) -> Result<RecordBatch, IndexError> {
    let schema = vectorless.schema(dim);
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        columns.push(match field.name().as_str() {
            "vector" => vector.clone(),
            "model" => model.clone(),
            ctxd_index::schema::EMBED_KEY => key.clone(),
            // Absent in blocks of a table written before sources had names: null, as there.
            ctxd_index::schema::SOURCE if block.column_by_name(ctxd_index::schema::SOURCE).is_none() => {
                arrow_array::new_null_array(field.data_type(), block.num_rows())
            }
            ctxd_index::schema::LATE => late.clone(),
            name => block
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| IndexError::Column { uri: uri.to_string(), column: name.into() })?,
        });
    }
    Ok(RecordBatch::try_new(schema, columns)?)
}
