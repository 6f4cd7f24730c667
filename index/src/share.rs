//! A worker's share of a table's rows: one of `N` equal parts of a version's live rows, as
//! row ranges of its data fragments, read without touching the other parts.
//!
//! A distributed re-embedding (`ctxd reembed --shard I/N`) used to read every row of the
//! source table and keep the chunk ids whose hash was its own: each shard's reading did not
//! fall with `N`. Now shard `I` reads only its share ([`Vectors::row_share`]): the fragments of the
//! version, in manifest order, are laid end to end by their live row counts (physical rows less
//! those deleted), `R` in all, and the share is the rows `[I·R/N, (I+1)·R/N)` of that sequence,
//! cut into one range per fragment it spans. Lance reads a range of a fragment's live rows from
//! its data files directly ([`Vectors::scan_share_without_vectors`]), so a shard reads about `1/N`
//! of the bytes. Over one version the shares are disjoint and cover
//! every row, whatever the fragment sizes (a compacted table is often a single fragment, which
//! a split by whole fragments would give to one shard); so every shard must read **the same
//! version** — the re-embedding pins it with one tag per run.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::RecordBatch;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use lance::dataset::fragment::FragReadConfig;

use crate::error::IndexError;
use crate::vectors::Vectors;

/// Rows a read of a share yields per batch.
const BATCH_ROWS: u32 = 1024;

/// A range of one fragment's live rows (offsets among the rows not deleted), and the data bytes it holds (its part of the
/// fragment's data files, in proportion to its rows).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    fragment: u64,
    rows: Range<u32>,
    bytes: u64,
}

/// Share `index` of `of` of one version's rows (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowShare {
    pieces: Vec<Piece>,
    /// The version the share is of.
    pub version: u64,
}

impl RowShare {
    /// Rows in the share.
    pub fn rows(&self) -> u64 {
        self.pieces.iter().map(|p| (p.rows.end - p.rows.start) as u64).sum()
    }

    /// Data-file bytes of the share's rows (each fragment's bytes in proportion to its rows).
    pub fn bytes(&self) -> u64 {
        self.pieces.iter().map(|p| p.bytes).sum()
    }

    /// Fragments the share touches.
    pub fn fragments(&self) -> usize {
        self.pieces.len()
    }
}

/// Share `index` of `of` over `fragments` — `(id, live rows, data bytes)` in manifest order.
fn split(fragments: &[(u64, u64, u64)], index: u32, of: u32) -> Vec<Piece> {
    let total: u64 = fragments.iter().map(|f| f.1).sum();
    let of = u64::from(of.max(1));
    let bound = |i: u64| (u128::from(total) * u128::from(i) / u128::from(of)) as u64;
    let (from, to) = (bound(u64::from(index)), bound(u64::from(index) + 1));
    let mut pieces = Vec::new();
    let mut start = 0u64;
    for &(fragment, rows, bytes) in fragments {
        let (lo, hi) = (from.max(start), to.min(start + rows));
        if lo < hi {
            let part = (u128::from(bytes) * u128::from(hi - lo) / u128::from(rows.max(1))) as u64;
            pieces.push(Piece { fragment, rows: (lo - start) as u32..(hi - start) as u32, bytes: part });
        }
        start += rows;
    }
    pieces
}

impl Vectors<'_> {
    /// Share `index` of `of` of this handle's version ([`Snapshots::at`] pins one).
    pub async fn row_share(self, index: u32, of: u32) -> Result<RowShare, IndexError> {
        let dataset = self.index.dataset().await?;
        let mut fragments = Vec::with_capacity(dataset.fragments().len());
        for f in dataset.fragments().iter() {
            let bytes = f.files.iter().filter_map(|d| d.file_size_bytes.get()).map(|b| b.get()).sum();
            // Live rows: Lance reads ranges among the rows not deleted. A manifest without the
            // counts (an old writer) would leave rows to no share: refused instead.
            let Some(rows) = f.num_rows() else {
                return Err(IndexError::Snapshot {
                    uri: self.index.uri.clone(),
                    message: format!(
                        "fragment {} of table {} does not record its row count, so it cannot be shared: run \
                         `ctxd compact` (which rewrites it) or re-embed on one machine",
                        f.id, self.index.table_name
                    ),
                });
            };
            fragments.push((f.id, rows as u64, bytes));
        }
        Ok(RowShare { pieces: split(&fragments, index, of), version: dataset.version().version })
    }

    /// The rows of `share` without what their model made (as [`Reads::scan_without_vectors`]),
    /// read from the share's fragment ranges only.
    pub async fn scan_share_without_vectors(
        self,
        share: &RowShare,
    ) -> Result<BoxStream<'static, Result<RecordBatch, IndexError>>, IndexError> {
        let dataset = self.index.dataset().await?;
        let (uri, version) = (self.index.uri.clone(), dataset.version().version);
        if version != share.version {
            return Err(IndexError::Snapshot {
                uri,
                message: format!("a share of version {} read at version {version}: open that version", share.version),
            });
        }
        let lance = move |e: lance::Error| IndexError::Lance { uri: uri.clone(), source: e.into() };
        let columns = self.index.columns_without_vectors().await?;
        let projection = Arc::new(dataset.schema().project(&columns).map_err(&lance)?);
        let batches = futures::stream::iter(share.pieces.clone())
            .then(move |piece| {
                let (dataset, projection, lance) = (dataset.clone(), projection.clone(), lance.clone());
                async move {
                    let Some(fragment) = dataset.get_fragment(piece.fragment as usize) else {
                        return Err(lance(lance::Error::invalid_input(format!(
                            "fragment {} is not in version {version}",
                            piece.fragment
                        ))));
                    };
                    let reader = fragment.open(&projection, FragReadConfig::default()).await.map_err(&lance)?;
                    let batches = reader.read_range(piece.rows, BATCH_ROWS).await.map_err(&lance)?;
                    Ok(batches.buffered(1).map_err(lance))
                }
            })
            .try_flatten();
        Ok(batches.boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Index;

    #[test]
    fn shares_are_disjoint_cover_every_row_and_cut_inside_fragments() {
        // One big fragment, a small one, an empty one, another.
        let fragments = [(0, 1000, 10_000), (3, 7, 70), (4, 0, 0), (9, 93, 930)];
        for of in [1, 2, 3, 4, 7] {
            let shares: Vec<Vec<Piece>> = (0..of).map(|i| split(&fragments, i, of)).collect();
            let mut seen: Vec<(u64, u32)> =
                shares.iter().flatten().flat_map(|p| p.rows.clone().map(move |r| (p.fragment, r))).collect();
            let total = seen.len();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!((seen.len(), total), (1100, 1100), "N = {of}: every row once");
            for s in &shares {
                let rows: u64 = s.iter().map(|p| (p.rows.end - p.rows.start) as u64).sum();
                assert!(rows.abs_diff(1100 / u64::from(of)) <= 1, "N = {of}: {rows} rows in a share");
                let bytes: u64 = s.iter().map(|p| p.bytes).sum();
                assert!(bytes.abs_diff(rows * 10) <= s.len() as u64, "bytes follow rows: {bytes} for {rows}");
            }
        }
        // Two shares of one 1000-row fragment: cut in the middle.
        assert_eq!(split(&[(5, 1000, 0)], 1, 2), vec![Piece { fragment: 5, rows: 500..1000, bytes: 0 }]);
        assert!(split(&[], 0, 3).is_empty());
    }

    #[tokio::test]
    async fn a_share_reads_its_rows_and_only_those() {
        use crate::writer::CommitBatch;
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        // Three commits (three fragments), then a file replaced (a deletion inside one).
        for part in 0..3 {
            let rows = (part * 10..part * 10 + 10).map(crate::testing::row).collect();
            index.writes().commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        }
        index.writes().delete_chunk_ids(&["c4".to_string()]).await.unwrap();
        let mut all = Vec::new();
        for i in 0..3 {
            let share = index.vectors().row_share(i, 3).await.unwrap();
            assert_eq!(share.rows(), if i == 2 { 10 } else { 9 + u64::from(i) }, "29 live rows in three shares");
            let mut ids = Vec::new();
            let mut stream = index.vectors().scan_share_without_vectors(&share).await.unwrap();
            while let Some(batch) = stream.next().await {
                let batch = batch.unwrap();
                assert!(batch.schema().column_with_name("vector").is_none(), "no vectors read");
                let col = batch.column_by_name("chunk_id").unwrap();
                let col = col.as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
                ids.extend(col.iter().flatten().map(str::to_string));
            }
            all.extend(ids);
        }
        all.sort();
        let mut want: Vec<String> = (0..30).filter(|i| *i != 4).map(|i| format!("c{i}")).collect();
        want.sort();
        assert_eq!(all, want, "every live row once, the deleted one skipped");
    }
}
