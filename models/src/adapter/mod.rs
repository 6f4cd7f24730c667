//! A query adapter: a linear map on a query's pooled vector, fitted on one repository's own
//! history so that its commit messages land near the files they changed.
//!
//! The documents' vectors stay as the index holds them (the locked document tower): only the
//! query side moves, so an index gets the adapter without being re-embedded and loses nothing
//! when it is dropped. The map `W` (`dim × dim`; a query row vector times `W`, then made unit
//! length again) starts at the identity and is pulled back toward it with strength λ. The fit
//! ([`Fit`]) is `ridge.rs`: closed form, each message toward the mean of its files' vectors. A
//! contrastive fit (each message also pushed away from every other file) was measured beside it
//! on the localization training repositories, won on one of three and lost to the base on
//! another, and was left out (BENCHMARKS.md, "Issue 86").
//!
//! [`select`] is how an adapter earns its use: the newest commits are held out, each fit of
//! [`CANDIDATES`] is made on the older ones, and the held-out commits' files are ranked among all
//! files by the base query vector and by each fit (MRR@10 of the best-ranked changed file). The
//! best fit is kept only when it beats the base there; it is then made again on every commit. No
//! commit after the ones given is ever seen, so the caller decides what "up to now" is (an
//! index's history as of its snapshot).

use std::time::Instant;

use crate::embedder::scale_to_unit;

mod ridge;

/// A way of fitting the map, with its pull toward the identity (λ).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase", tag = "fit", content = "lambda")]
pub enum Fit {
    Ridge(f32),
}

/// The fits [`select`] tries: the ridge fit at the strength that ranked training issues' files
/// best on all three localization training repositories probed (BENCHMARKS.md, "Issue 86";
/// `benches/adapter_probe.py`).
pub const CANDIDATES: [Fit; 1] = [Fit::Ridge(30.0)];
/// Fewest commits, after the held-out ones, an adapter is fitted on.
pub const MIN_TRAIN: usize = 30;
/// Fewest and most commits held out to judge a fit.
pub const MIN_HELD_OUT: usize = 10;
pub const MAX_HELD_OUT: usize = 200;
/// Share of the commits held out (the newest).
pub const HELD_OUT_SHARE: f64 = 0.1;

/// Why no adapter could be made from the input, or read from its stored form.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("query adapter: {got} values do not make {what} rows of dimension {dim}")]
    Shape { what: &'static str, got: usize, dim: usize },
    #[error(
        "query adapter: the ridge fit's normal equations are not positive definite (λ = {0}); use a larger strength"
    )]
    Singular(f32),
    #[error("query adapter: stored weights are malformed ({0}); run `ctxd adapt` again")]
    Malformed(&'static str),
}

/// A fitted linear query map (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryAdapter {
    dim: usize,
    /// Row-major `dim × dim`: `q' = q · W`.
    weights: Vec<f32>,
}

/// One training example: a commit message's query vector and the files it changed (indexes into
/// the file vectors given beside it).
#[derive(Debug, Clone)]
pub struct Example {
    pub query: Vec<f32>,
    pub files: Vec<usize>,
}

/// What [`select`] measured, whether or not it kept an adapter.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Selection {
    /// Usable commits given (the kept adapter is fitted on all of them).
    pub commits: usize,
    /// Newest commits held out to judge the fits.
    pub held_out: usize,
    /// MRR@10 of the held-out commits' files by the base query vectors.
    pub base_mrr: f64,
    /// The best fit's MRR@10 there, kept or not (0 when none was made).
    pub adapted_mrr: f64,
    /// The best fit when it beat the base; `None`: none did (or too few commits).
    pub fit: Option<Fit>,
    /// Time spent fitting and judging, in milliseconds.
    pub fit_ms: u64,
}

impl QueryAdapter {
    /// `fit` made on `examples` over the file vectors `files` (row-major, `dim` wide, unit rows).
    pub fn fit(examples: &[&Example], files: &[f32], dim: usize, fit: Fit) -> Result<Self, AdapterError> {
        if dim == 0 || !files.len().is_multiple_of(dim) {
            return Err(AdapterError::Shape { what: "file", got: files.len(), dim });
        }
        if let Some(e) = examples.iter().find(|e| e.query.len() != dim) {
            return Err(AdapterError::Shape { what: "query", got: e.query.len(), dim });
        }
        let queries: Vec<f32> = examples.iter().flat_map(|e| e.query.iter().copied()).collect();
        let weights = match fit {
            Fit::Ridge(lambda) => {
                let targets: Vec<f32> = examples.iter().flat_map(|e| target(files, dim, &e.files)).collect();
                ridge::fit(&queries, &targets, dim, lambda).ok_or(AdapterError::Singular(lambda))?
            }
        };
        Ok(Self { dim, weights })
    }

    /// The identity map of dimension `dim` (what an unfitted query side is).
    pub fn identity(dim: usize) -> Self {
        let mut weights = vec![0f32; dim * dim];
        for i in 0..dim {
            weights[i * dim + i] = 1.0;
        }
        Self { dim, weights }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// `q · W`, unit length (`q` unchanged when its length is not the adapter's dimension).
    pub fn apply(&self, q: &[f32]) -> Vec<f32> {
        if q.len() != self.dim {
            return q.to_vec();
        }
        let mut out = vec![0f32; self.dim];
        for (&qi, row) in q.iter().zip(self.weights.chunks_exact(self.dim)) {
            for (o, &w) in out.iter_mut().zip(row) {
                *o += qi * w;
            }
        }
        scale_to_unit(&mut out);
        out
    }

    /// The stored form: the weights, little-endian f32, row by row.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.weights.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Reads [`Self::to_bytes`]'s form for dimension `dim`.
    pub fn from_bytes(bytes: &[u8], dim: usize) -> Result<Self, AdapterError> {
        if dim.checked_mul(dim).and_then(|n| n.checked_mul(4)) != Some(bytes.len()) || dim == 0 {
            return Err(AdapterError::Malformed("its length is not that of the dimension's weights"));
        }
        let weights: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(AdapterError::Malformed("a weight is not a finite number"));
        }
        Ok(Self { dim, weights })
    }
}

/// A commit's ridge target: the unit mean of its files' vectors.
fn target(files: &[f32], dim: usize, ids: &[usize]) -> Vec<f32> {
    let mut t = vec![0f32; dim];
    for &f in ids {
        for (o, v) in t.iter_mut().zip(&files[f * dim..(f + 1) * dim]) {
            *o += v;
        }
    }
    scale_to_unit(&mut t);
    t
}

/// Fits adapters on `examples` (newest first) over the file vectors `files` (row-major, `dim`
/// wide, unit rows) and keeps the best only when it ranks the newest commits' files better than
/// the base (see the module docs). Examples with another dimension, no file, or a file beyond
/// `files` are left out.
pub fn select(
    examples: &[Example],
    files: &[f32],
    dim: usize,
) -> Result<(Option<QueryAdapter>, Selection), AdapterError> {
    let started = Instant::now();
    if dim == 0 || !files.len().is_multiple_of(dim) {
        return Err(AdapterError::Shape { what: "file", got: files.len(), dim });
    }
    let n_files = files.len() / dim;
    let usable: Vec<&Example> = examples
        .iter()
        .filter(|e| e.query.len() == dim && !e.files.is_empty() && e.files.iter().all(|&f| f < n_files))
        .collect();
    let held_out = ((usable.len() as f64 * HELD_OUT_SHARE) as usize).clamp(MIN_HELD_OUT, MAX_HELD_OUT);
    let mut report =
        Selection { commits: usable.len(), held_out: 0, base_mrr: 0.0, adapted_mrr: 0.0, fit: None, fit_ms: 0 };
    if usable.len() < held_out + MIN_TRAIN {
        report.fit_ms = started.elapsed().as_millis() as u64;
        return Ok((None, report));
    }
    let (judge, train) = usable.split_at(held_out);
    report.held_out = held_out;
    report.base_mrr = mrr(judge, files, dim, &QueryAdapter::identity(dim));
    let mut best: Option<(f64, Fit)> = None;
    for fit in CANDIDATES {
        let m = mrr(judge, files, dim, &QueryAdapter::fit(train, files, dim, fit)?);
        if best.is_none_or(|(b, _)| m > b) {
            best = Some((m, fit));
        }
    }
    let (best_mrr, best_fit) = best.expect("CANDIDATES is not empty");
    report.adapted_mrr = best_mrr;
    report.fit = (best_mrr > report.base_mrr).then_some(best_fit);
    let kept = match report.fit {
        Some(fit) => Some(QueryAdapter::fit(&usable, files, dim, fit)?),
        None => None,
    };
    report.fit_ms = started.elapsed().as_millis() as u64;
    Ok((kept, report))
}

/// MRR@10 of each example's best-ranked file among all `files` by cosine with its adapted query.
fn mrr(examples: &[&Example], files: &[f32], dim: usize, adapter: &QueryAdapter) -> f64 {
    let mut total = 0.0;
    for e in examples {
        let q = adapter.apply(&e.query);
        let scores: Vec<f32> = files.chunks_exact(dim).map(|f| f.iter().zip(&q).map(|(a, b)| a * b).sum()).collect();
        // The rank of the best-scoring changed file: how many files score above it.
        let best = e.files.iter().map(|&f| scores[f]).fold(f32::NEG_INFINITY, f32::max);
        let above = scores.iter().filter(|&&s| s > best).count();
        if above < 10 {
            total += 1.0 / (above + 1) as f64;
        }
    }
    total / examples.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    }

    fn example(query: Vec<f32>, files: Vec<usize>) -> Example {
        Example { query, files }
    }

    #[test]
    fn a_weak_ridge_pull_learns_the_map_and_a_strong_one_keeps_the_identity() {
        // Targets are the queries with two coordinates swapped: a weak pull learns the swap.
        let dim = 4;
        let files = QueryAdapter::identity(dim).weights;
        let mut seed = 7;
        let ex: Vec<Example> = (0..200)
            .map(|i| {
                let mut q: Vec<f32> = (0..dim).map(|_| 0.2 * rng(&mut seed)).collect();
                q[i % 2] += 1.0;
                scale_to_unit(&mut q);
                example(q, vec![1 - i % 2])
            })
            .collect();
        let refs: Vec<&Example> = ex.iter().collect();
        let weak = QueryAdapter::fit(&refs, &files, dim, Fit::Ridge(1e-3)).unwrap();
        let q = [1.0, 0.0, 0.0, 0.0];
        let out = weak.apply(&q);
        assert!(out[1] > out[0], "{out:?}");
        let strong = QueryAdapter::fit(&refs, &files, dim, Fit::Ridge(1e6)).unwrap();
        assert!(strong.apply(&q)[0] > 0.99, "{:?}", strong.weights);
    }

    #[test]
    fn the_stored_form_reads_back_and_refuses_a_wrong_length() {
        let a = QueryAdapter::identity(3);
        let bytes = a.to_bytes();
        assert_eq!(QueryAdapter::from_bytes(&bytes, 3).unwrap(), a);
        assert!(QueryAdapter::from_bytes(&bytes[..bytes.len() - 1], 3).is_err());
        assert!(QueryAdapter::from_bytes(&bytes, 2).is_err());
        let mut nan = bytes.clone();
        nan[..4].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(QueryAdapter::from_bytes(&nan, 3).is_err());
        let files = QueryAdapter::identity(2).weights;
        assert!(QueryAdapter::fit(&[&example(vec![1.0; 3], vec![0])], &files, 2, Fit::Ridge(1.0)).is_err());
    }

    #[test]
    fn select_keeps_a_fit_that_helps_and_refuses_one_that_does_not() {
        // Files are the axes of 8 dimensions; each message points at file k+1 more than at file
        // k, which it changed: only a learned map ranks file k first.
        let dim = 8;
        let files = QueryAdapter::identity(dim).weights;
        let mut seed = 3;
        let shifted: Vec<Example> = (0..400)
            .map(|i| {
                let k = i % dim;
                let mut q: Vec<f32> = (0..dim).map(|_| 0.1 * rng(&mut seed)).collect();
                q[(k + 1) % dim] += 1.0;
                q[k] += 0.8;
                scale_to_unit(&mut q);
                example(q, vec![k])
            })
            .collect();
        let (kept, report) = select(&shifted, &files, dim).unwrap();
        assert!(kept.is_some() && report.adapted_mrr > report.base_mrr + 0.3, "{report:?}");
        // Messages that already point at their files: nothing to gain, the base is kept.
        let aligned: Vec<Example> =
            shifted.iter().map(|e| example(e.query.clone(), vec![(e.files[0] + 1) % dim])).collect();
        let (kept, report) = select(&aligned, &files, dim).unwrap();
        assert!(kept.is_none() && report.fit.is_none() && report.base_mrr > 0.99, "{report:?}");
        // Too few commits: nothing is fitted.
        let (kept, report) = select(&shifted[..20], &files, dim).unwrap();
        assert!(kept.is_none() && report.held_out == 0, "{report:?}");
    }
}
