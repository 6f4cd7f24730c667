//! Migration of a table an older ctxd wrote: such a table has no `embed_key` column and
//! vectors cached by content alone (some may be of another text than their row's). A writer
//! (`Pipeline::open`) re-embeds such a table once with its own model, by the same job as `ctxd
//! reembed` ([`crate::reembed`]) into a new keyed table and the same switch, with a log line
//! saying so; queries keep using the old table until the switch, so old and new vectors are
//! never mixed.

use ctxd_index::store::Index;

use super::job::{JobModel, Quiet, ReembedOptions, ReembedReport};
use super::run::run;
use crate::error::PipelineError;

/// Re-embeds the active table at `db` once with `model` when it was written by an older ctxd
/// (no `embed_key` column, see the module docs) and switches to the result; `None` when the
/// table is keyed already. Logs what it does.
pub async fn migrate(db: &str, model: JobModel, model_spec: &str) -> Result<Option<ReembedReport>, PipelineError> {
    let source = Index::open(db).await?;
    if source.embed_keyed() {
        return Ok(None);
    }
    let rows = source.reads().stats().await?.rows;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{letters, row, text_len, Letters};
    use ctxd_index::{schema::ChunkRow, writer::CommitBatch};
    use ctxd_models::{service::EmbedService, service::EmbedServiceConfig};

    /// A table as an older ctxd wrote it: the chunks schema without `embed_key`.
    async fn legacy_table(db: &str, rows: &[ChunkRow], dim: usize) {
        let batch = ctxd_index::schema::rows_to_batch(rows, dim, false, ctxd_index::schema::Vectorless::Zeros).unwrap();
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
        assert_eq!(old.reads().fts_search("item_3", 2).await.unwrap().len(), 0, "searchable, no full-text index yet");
        assert!(old.reads().vector_search(&letters(3), 2).await.is_ok(), "an old table still answers queries");
        let err = old.writes().commit(CommitBatch { rows: vec![row(50, "test/letters")], ..Default::default() }).await;
        assert!(err.unwrap_err().to_string().contains("re-embed it once"), "writes are refused before migrating");

        // A concurrent job got there first and wrote rows 0..3 twice: they are redone, once.
        let early = Index::open_or_create_table(&db, "chunks__test-letters", "test/letters", 6).await.unwrap();
        for _ in 0..2 {
            let rows: Vec<ChunkRow> =
                (0..3).map(|i| ChunkRow { vector: letters(0), ..row(i, "test/letters") }).collect();
            early.writes().commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        }
        assert_eq!(early.reads().chunk_ids_and_duplicates().await.unwrap().1.len(), 3);
        let model = JobModel::from(EmbedService::spawn(Letters, EmbedServiceConfig::default()));
        let report = migrate(&db, model.clone(), "test/letters").await.unwrap().expect("migrated");
        assert_eq!((report.from_table.as_str(), report.to_table.as_str()), ("chunks", "chunks__test-letters"));
        assert_eq!((report.rows, report.embedded), (12, 12));
        let now = Index::open(&db).await.unwrap();
        assert!(now.embed_keyed());
        assert_eq!(now.table_name(), "chunks__test-letters");
        assert!(now.reads().chunk_ids_and_duplicates().await.unwrap().1.is_empty());
        assert_eq!(now.reads().stats().await.unwrap().rows, 12);
        let ids: Vec<String> = (0..12).map(|i| format!("c{i:03}")).collect();
        let vectors = now.vectors().vectors_of_chunks(&ids).await.unwrap();
        for i in 0..12 {
            assert_eq!(vectors[&ids[i]], letters(text_len(i)), "row {i} holds the vector of its own text");
        }
        // The key is the model and the text: the indexer's cache finds these rows.
        let r = row(4, "");
        let key =
            ctxd_models::embed_key("test/letters", &ctxd_models::chunk_text(&r.path, r.symbol.as_deref(), &r.content));
        let cached = now.vectors().embeddings_for(std::slice::from_ref(&key), false).await.unwrap();
        assert_eq!(cached[&key].vector, letters(text_len(4)));
        // Once is enough.
        assert!(migrate(&db, model, "test/letters").await.unwrap().is_none());
    }
}
