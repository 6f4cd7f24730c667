//! Late-interaction codes: a chunk's token states computed once at index time, stored with the
//! chunk, and scored against a query's token states by MaxSim without a forward pass.
//!
//! Rescoring ([`crate::embedder::max_sim`]) compares every query token's unit state `q` with every
//! chunk token's unit state `d` and keeps each query token's best cosine. What indexing stores by
//! default is [`LateCodec::full`]: every token's `dim` values at 8 bits with a scale, `dim + 6`
//! bytes a token (390 for MiniLM's 384, against 1,536 as floats) — the scores are the model's to
//! within the rounding (the tests hold them within 0.01), so rescoring from stored codes ranks as
//! rescoring with the model does.
//!
//! **Compressed codecs** (fitted: [`LateCodec::fit`], `ctxd bench --fit-late`; measured by naming
//! the file in `CTXD_LATE_CODEC`) keep a token as its word piece's **anchor** — the mean state of
//! that token id over the fitting text (an id seen fewer than [`MIN_ANCHOR_COUNT`] times takes the
//! mean of all states) — plus its offset in context projected on the `k` principal directions `B`
//! of those offsets around their mean `m`, one byte a direction:
//!
//! ```text
//! q · d  =  q · a  +  q · (d − a)  ≈  q · a  +  q · m  +  (B q) · c,    c = B (d − a − m)  (8-bit)
//! ```
//!
//! `k + 6` bytes a token. Measured on CoSQA dev (BENCHMARKS.md), `k = 64` codecs fitted on
//! training repositories lost the rescoring's whole gain (routed nDCG@10 below rescoring switched
//! off): the scores of a question's candidates lie close together, and an error of a few hundredths
//! reorders them. So none ships; the code stays for the next attempt (a projection trained to
//! keep the order, not the values).
//!
//! A query is prepared once per search ([`LateCodec::query`]); a chunk's MaxSim is then `k`
//! multiply-adds per (query token, chunk token) pair ([`LateCodec::max_sim`]). A codec is
//! identified by a tag (the first bytes of a hash of its serialised form) at the head of every
//! code, so codes written with another codec are never scored with this one: rescoring encodes
//! those candidates with the model as before. Codes are looked up by embedding key, which names
//! the model, so one model's codes are never read as another's.

use std::collections::HashMap;

use crate::error::ModelError;

/// Bytes at the head of a code: the codec's tag (4), the token count (2), `k` (2).
const HEADER: usize = 8;
/// The serialised codec's first bytes.
const MAGIC: &[u8; 8] = b"ctxdlat2";
/// Tokens a code holds at most (the header's count is 16 bits; windows are far shorter).
const MAX_TOKENS: usize = u16::MAX as usize;
/// Anchors a codec holds at most (a code names one in 16 bits).
const MAX_ANCHORS: usize = u16::MAX as usize;
/// Occurrences a token id needs in the fitting text for an anchor of its own.
pub const MIN_ANCHOR_COUNT: usize = 3;
/// The token id anchor 0 (the mean of all states) stands for.
const EVERY_ID: u32 = u32::MAX;

/// The variable naming a codec file to use instead of the shipped ones ([`LateCodec::shipped`]).
pub const CODEC_ENV: &str = "CTXD_LATE_CODEC";

/// Fitted codecs that ship with ctxd: (model id, serialised codec). None yet (see the module docs).
const SHIPPED: &[(&str, &[u8])] = &[];

/// Word-piece anchors and the principal directions of the offsets from them (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct LateCodec {
    dim: usize,
    k: usize,
    /// Anchor index → token id ([`EVERY_ID`] for anchor 0).
    ids: Vec<u32>,
    /// Token id → anchor index (derived from `ids`).
    anchor_of: HashMap<u32, u16>,
    /// Each anchor's state, 8-bit: a scale per anchor and `dim` signed bytes.
    anchor_scales: Vec<f32>,
    anchor_bytes: Vec<i8>,
    /// The anchors as floats (derived).
    anchors: Vec<f32>,
    /// The mean offset from the anchors (`dim` values).
    mean: Vec<f32>,
    /// `k` orthonormal directions of `dim` values each, by explained variance, largest first.
    basis: Vec<f32>,
    /// The full codec ([`LateCodec::full`]): no anchors, no projection (derived).
    identity: bool,
    tag: u32,
}

/// A query's token states prepared for one codec (see [`LateCodec::max_sim`]).
#[derive(Debug, Clone)]
pub struct LateQuery {
    rows: Vec<f32>,
    /// Per query token: its dot product with the mean offset.
    bias: Vec<f32>,
    /// Per query token: its `k` projections.
    proj: Vec<f32>,
    /// Anchor → its dot product with each query token, as met.
    dots: HashMap<u16, Vec<f32>>,
}

impl LateCodec {
    /// The codec that ships for `model_id` with `dim`-dimension states, if any. `CTXD_LATE_CODEC`
    /// names a codec file to use instead, for every model of its dimension (how a newly fitted
    /// codec is measured before it ships; `none` turns stored codes off).
    pub fn shipped(model_id: &str, dim: usize) -> Option<Self> {
        if let Some(path) = std::env::var_os(CODEC_ENV) {
            if path == "none" {
                return None;
            }
            let read = std::fs::read(&path).map_err(|e| e.to_string());
            return match read.and_then(|b| Self::from_bytes(&b).map_err(|e| e.to_string())) {
                Ok(codec) => Some(codec).filter(|c| c.dim == dim),
                Err(e) => {
                    tracing::warn!("{CODEC_ENV}={}: {e}; no late-interaction codes", path.to_string_lossy());
                    None
                }
            };
        }
        let (_, bytes) = SHIPPED.iter().find(|(id, _)| *id == model_id)?;
        Self::from_bytes(bytes).ok().filter(|c| c.dim == dim)
    }

    /// The codec every model with token states stores its codes with unless `CTXD_LATE_CODEC`
    /// names another: every token's `dim` values at 8 bits with its scale (no anchors, no
    /// projection), so the stored MaxSim is the model's to within the rounding. It needs no
    /// fitting, and a model's codes are found only under its own embedding keys, so one codec
    /// serves every model of a dimension.
    pub fn full(dim: usize) -> Self {
        let mut basis = vec![0f32; dim * dim];
        (0..dim).for_each(|i| basis[i * dim + i] = 1.0);
        Self::assemble(dim, dim, vec![EVERY_ID], vec![1.0 / 127.0], vec![0; dim], vec![0.0; dim], basis)
    }

    /// The codec chunks embedded by `model_id` (`dim`-dimension token states) are stored with:
    /// the file `CTXD_LATE_CODEC` names (a fitted codec being measured), none when it says
    /// `none`, else [`LateCodec::full`].
    pub fn for_model(model_id: &str, dim: usize) -> Option<Self> {
        match std::env::var_os(CODEC_ENV) {
            Some(_) => Self::shipped(model_id, dim),
            None => Self::shipped(model_id, dim).or_else(|| Some(Self::full(dim))),
        }
    }

    /// Fits a codec of `k` directions on unit token rows (`rows.len() / dim` of them, as
    /// [`crate::embedder::Embedder::forward_tokens`] returns them) and their token ids (one each,
    /// [`crate::embedder::inner_ids`]): the anchors, then the mean and top `k` eigenvectors of the
    /// offsets' covariance (cyclic Jacobi on the `dim × dim` matrix, in f64).
    pub fn fit(rows: &[f32], ids: &[u32], dim: usize, k: usize) -> Result<Self, ModelError> {
        let n = rows.len() / dim.max(1);
        if dim == 0 || n < 2 || k == 0 || k > dim || ids.len() != n {
            return Err(ModelError::Backend(format!(
                "fitting a late-interaction codec needs k in 1..={dim}, at least 2 token rows and an id per row \
                 (got k {k}, {n} rows, {} ids)",
                ids.len()
            )));
        }
        let (token_ids, anchors) = fit_anchors(rows, ids, dim);
        let (anchor_scales, anchor_bytes) = quantize_rows(&anchors, dim);
        let partial = Self::assemble(dim, 1, token_ids, anchor_scales, anchor_bytes, vec![0.0; dim], vec![0.0; dim]);
        let offsets: Vec<f32> = rows
            .chunks_exact(dim)
            .zip(ids)
            .flat_map(|(row, id)| {
                let a = partial.anchor(*id);
                row.iter().zip(a).map(|(v, a)| v - a).collect::<Vec<_>>()
            })
            .collect();
        let (mean, basis) = principal_directions(&offsets, dim, k);
        let LateCodec { ids, anchor_scales, anchor_bytes, .. } = partial;
        Ok(Self::assemble(dim, k, ids, anchor_scales, anchor_bytes, mean, basis))
    }

    fn assemble(
        dim: usize,
        k: usize,
        ids: Vec<u32>,
        anchor_scales: Vec<f32>,
        anchor_bytes: Vec<i8>,
        mean: Vec<f32>,
        basis: Vec<f32>,
    ) -> Self {
        let anchor_of = ids.iter().enumerate().map(|(i, &id)| (id, i as u16)).collect();
        let anchors = anchor_bytes
            .chunks_exact(dim)
            .zip(&anchor_scales)
            .flat_map(|(row, s)| row.iter().map(move |&b| f32::from(b) * s))
            .collect();
        let identity = k == dim
            && ids.len() == 1
            && anchor_bytes.iter().all(|&b| b == 0)
            && mean.iter().all(|&m| m == 0.0)
            && basis
                .chunks_exact(dim)
                .enumerate()
                .all(|(i, row)| row.iter().enumerate().all(|(j, &v)| v == f32::from(u8::from(i == j))));
        let mut codec =
            Self { dim, k, ids, anchor_of, anchor_scales, anchor_bytes, anchors, mean, basis, identity, tag: 0 };
        let hash = blake3::hash(&codec.to_bytes());
        codec.tag = u32::from_le_bytes(hash.as_bytes()[..4].try_into().unwrap_or_default());
        codec
    }

    /// The state dimension it takes.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Directions kept (bytes a token, besides its anchor and scale).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Anchors it holds (the mean of all states included).
    pub fn anchors(&self) -> usize {
        self.ids.len()
    }

    /// The tag its codes carry.
    pub fn tag(&self) -> u32 {
        self.tag
    }

    fn anchor_index(&self, id: u32) -> u16 {
        self.anchor_of.get(&id).copied().unwrap_or(0)
    }

    fn anchor(&self, id: u32) -> &[f32] {
        self.anchor_at(self.anchor_index(id))
    }

    fn anchor_at(&self, index: u16) -> &[f32] {
        let i = usize::from(index);
        &self.anchors[i * self.dim..(i + 1) * self.dim]
    }

    /// The codec as bytes: magic, `dim`, `k`, the anchor count (u32 LE), the anchors' token ids
    /// (u32 LE), their scales (f32 LE) and bytes, the mean offset and the basis (f32 LE).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.ids.len() * (8 + self.dim) + 4 * self.dim * (self.k + 1));
        out.extend_from_slice(MAGIC);
        for word in [self.dim, self.k, self.ids.len()] {
            out.extend_from_slice(&(word as u32).to_le_bytes());
        }
        self.ids.iter().for_each(|id| out.extend_from_slice(&id.to_le_bytes()));
        self.anchor_scales.iter().for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
        out.extend(self.anchor_bytes.iter().map(|&b| b as u8));
        for v in self.mean.iter().chain(&self.basis) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Reads [`LateCodec::to_bytes`]'s form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
        let bad = |why: String| ModelError::Backend(format!("late-interaction codec: {why}"));
        if bytes.len() < 20 || &bytes[..8] != MAGIC {
            return Err(bad("not a codec (wrong magic)".into()));
        }
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()) as usize;
        let (dim, k, n) = (word(8), word(12), word(16));
        let expected = 20 + n * (8 + dim) + 4 * dim * (k + 1);
        if dim == 0 || k == 0 || k > dim || n == 0 || n > MAX_ANCHORS || bytes.len() != expected {
            return Err(bad(format!("dim {dim}, k {k}, {n} anchors do not match its {} bytes", bytes.len())));
        }
        let floats = |from: usize, count: usize| -> Vec<f32> {
            bytes[from..from + 4 * count]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect()
        };
        let ids = (0..n).map(|i| word(20 + 4 * i) as u32).collect();
        let scales = floats(20 + 4 * n, n);
        let at = 20 + 8 * n;
        let anchor_bytes = bytes[at..at + n * dim].iter().map(|&b| b as i8).collect();
        let rest = floats(at + n * dim, dim * (k + 1));
        let (mean, basis) = rest.split_at(dim);
        Ok(Self::assemble(dim, k, ids, scales, anchor_bytes, mean.to_vec(), basis.to_vec()))
    }

    /// The code of one chunk's unit token rows and their token ids: the header, each token's
    /// anchor (u16 LE), scale (f32 LE), then `k` signed bytes per token.
    pub fn encode(&self, rows: &[f32], ids: &[u32]) -> Vec<u8> {
        let n = (rows.len() / self.dim).min(ids.len()).min(MAX_TOKENS);
        let mut out = Vec::with_capacity(HEADER + n * (6 + self.k));
        out.extend_from_slice(&self.tag.to_le_bytes());
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(&(self.k as u16).to_le_bytes());
        let anchors: Vec<u16> = ids[..n].iter().map(|&id| self.anchor_index(id)).collect();
        anchors.iter().for_each(|a| out.extend_from_slice(&a.to_le_bytes()));
        let mut offsets = Vec::with_capacity(n * self.k);
        let mut offset = vec![0f32; self.dim];
        let mut proj = vec![0f32; self.k];
        for (row, &a) in rows.chunks_exact(self.dim).zip(&anchors) {
            for (((o, v), an), m) in offset.iter_mut().zip(row).zip(self.anchor_at(a)).zip(&self.mean) {
                *o = v - an - m;
            }
            self.project(&offset, &mut proj);
            offsets.extend_from_slice(&proj);
        }
        let (scales, bytes) = quantize_rows(&offsets, self.k);
        scales.iter().for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
        out.extend(bytes.iter().map(|&b| b as u8));
        out
    }

    /// `B row` into `out`.
    fn project(&self, row: &[f32], out: &mut [f32]) {
        if self.identity {
            out.copy_from_slice(&row[..self.dim]);
            return;
        }
        for (o, b) in out.iter_mut().zip(self.basis.chunks_exact(self.dim)) {
            *o = row.iter().zip(b).map(|(v, w)| v * w).sum();
        }
    }

    /// A query's unit token rows prepared for [`LateCodec::max_sim`].
    pub fn query(&self, rows: &[f32]) -> LateQuery {
        let n = rows.len() / self.dim;
        let mut proj = vec![0f32; n * self.k];
        let mut bias = Vec::with_capacity(n);
        for (row, out) in rows.chunks_exact(self.dim).zip(proj.chunks_exact_mut(self.k)) {
            bias.push(dot(row, &self.mean));
            self.project(row, out);
        }
        LateQuery { rows: rows[..n * self.dim].to_vec(), bias, proj, dots: HashMap::new() }
    }

    /// Whether `code` was written by this codec (its tag, shape and anchors).
    pub fn reads(&self, code: &[u8]) -> bool {
        if code.len() < HEADER || u32::from_le_bytes(code[..4].try_into().unwrap_or_default()) != self.tag {
            return false;
        }
        let n = u16::from_le_bytes([code[4], code[5]]) as usize;
        let k = u16::from_le_bytes([code[6], code[7]]) as usize;
        k == self.k
            && code.len() == HEADER + n * (6 + k)
            && code[HEADER..HEADER + 2 * n]
                .chunks_exact(2)
                .all(|a| usize::from(u16::from_le_bytes([a[0], a[1]])) < self.ids.len())
    }

    /// MaxSim of a prepared query against a code of this codec (see the module docs): the mean
    /// over query tokens of each one's best approximate cosine with the chunk's tokens. `None`
    /// for a code this codec did not write; 0 for an empty query or code.
    pub fn max_sim(&self, query: &mut LateQuery, code: &[u8]) -> Option<f32> {
        if !self.reads(code) || query.proj.len() != query.bias.len() * self.k {
            return None;
        }
        let n = u16::from_le_bytes([code[4], code[5]]) as usize;
        if n == 0 || query.bias.is_empty() {
            return Some(0.0);
        }
        let anchors: Vec<u16> =
            code[HEADER..HEADER + 2 * n].chunks_exact(2).map(|a| u16::from_le_bytes([a[0], a[1]])).collect();
        for &a in &anchors {
            if !query.dots.contains_key(&a) {
                let anchor = self.anchor_at(a);
                let dots = query.rows.chunks_exact(self.dim).map(|q| dot(q, anchor)).collect();
                query.dots.insert(a, dots);
            }
        }
        let at = HEADER + 2 * n;
        let scales: Vec<f32> = code[at..at + 4 * n]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect();
        let values: Vec<f32> = code[at + 4 * n..].iter().map(|&b| f32::from(b as i8)).collect();
        let rows: Vec<&[f32]> = anchors.iter().map(|a| query.dots[a].as_slice()).collect();
        let k = self.k;
        let total: f32 = (0..query.bias.len())
            .map(|i| {
                let q = &query.proj[i * k..(i + 1) * k];
                let best = values
                    .chunks_exact(k)
                    .zip(&scales)
                    .zip(&rows)
                    .map(|((d, s), a)| a[i] + dot(q, d) * s)
                    .fold(f32::MIN, f32::max);
                query.bias[i] + best
            })
            .sum();
        Some(total / query.bias.len() as f32)
    }
}

/// The dot product of two rows, summed in eight lanes: a plain `zip().sum()` adds in order, one
/// value at a time (floating-point addition may not be reordered), while eight independent sums
/// are kept in SIMD registers — the MaxSim of a question's 30 candidates is a few million of
/// these products.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let (xs, ys) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = xs.remainder().iter().zip(ys.remainder()).map(|(x, y)| x * y).sum();
    let mut lanes = [0f32; 8];
    for (x, y) in xs.zip(ys) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Rows of `width` values at 8 bits: a scale per row (its largest value is ±127) and the bytes
/// (the codes' form, and rescoring's cache of token rows encoded at query time).
pub fn quantize_rows(rows: &[f32], width: usize) -> (Vec<f32>, Vec<i8>) {
    let mut scales = Vec::with_capacity(rows.len() / width.max(1));
    let mut bytes = Vec::with_capacity(rows.len());
    for row in rows.chunks_exact(width.max(1)) {
        let max = row.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-12);
        scales.push(max / 127.0);
        bytes.extend(row.iter().map(|v| (v / max * 127.0).round() as i8));
    }
    (scales, bytes)
}

/// The anchors of `rows` by their `ids`: anchor 0 the mean of every row ([`EVERY_ID`]), then
/// one per id seen at least [`MIN_ANCHOR_COUNT`] times (the mean of its rows), by id, at most
/// [`MAX_ANCHORS`] (the most frequent ids first when there are more).
fn fit_anchors(rows: &[f32], ids: &[u32], dim: usize) -> (Vec<u32>, Vec<f32>) {
    let mut sums: HashMap<u32, (usize, Vec<f64>)> = HashMap::new();
    let mut every = vec![0f64; dim];
    for (row, id) in rows.chunks_exact(dim).zip(ids) {
        let (count, sum) = sums.entry(*id).or_insert_with(|| (0, vec![0f64; dim]));
        *count += 1;
        for ((s, e), &v) in sum.iter_mut().zip(every.iter_mut()).zip(row) {
            *s += f64::from(v);
            *e += f64::from(v);
        }
    }
    let mut kept: Vec<(u32, usize)> =
        sums.iter().filter(|(_, (c, _))| *c >= MIN_ANCHOR_COUNT).map(|(&id, (c, _))| (id, *c)).collect();
    kept.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    kept.truncate(MAX_ANCHORS - 1);
    kept.sort_by_key(|&(id, _)| id);
    let n = rows.len() / dim;
    let mut ids_out = vec![EVERY_ID];
    let mut anchors: Vec<f32> = every.iter().map(|s| (s / n as f64) as f32).collect();
    for (id, count) in kept {
        ids_out.push(id);
        anchors.extend(sums[&id].1.iter().map(|s| (s / count as f64) as f32));
    }
    (ids_out, anchors)
}

/// The mean of `rows` and the top `k` eigenvectors of their covariance, each with a fixed sign
/// (its largest entry positive), as `k` rows of `dim` values.
fn principal_directions(rows: &[f32], dim: usize, k: usize) -> (Vec<f32>, Vec<f32>) {
    let n = (rows.len() / dim).max(1);
    let mut mean = vec![0f64; dim];
    for row in rows.chunks_exact(dim) {
        mean.iter_mut().zip(row).for_each(|(m, &v)| *m += f64::from(v));
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let mut cov = vec![0f64; dim * dim];
    let mut centred = vec![0f64; dim];
    for row in rows.chunks_exact(dim) {
        centred.iter_mut().zip(row.iter().zip(&mean)).for_each(|(c, (&v, m))| *c = f64::from(v) - m);
        for i in 0..dim {
            let ci = centred[i];
            cov[i * dim..i * dim + i + 1].iter_mut().zip(&centred[..=i]).for_each(|(x, &cj)| *x += ci * cj);
        }
    }
    for i in 0..dim {
        for j in 0..=i {
            let v = cov[i * dim + j] / n as f64;
            cov[i * dim + j] = v;
            cov[j * dim + i] = v;
        }
    }
    let (values, vectors) = symmetric_eigen(cov, dim);
    let mut order: Vec<usize> = (0..dim).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let mut basis = Vec::with_capacity(k * dim);
    for &e in &order[..k] {
        let col: Vec<f64> = (0..dim).map(|r| vectors[r * dim + e]).collect();
        let largest = col.iter().fold(0f64, |a, &v| if v.abs() > a.abs() { v } else { a });
        let sign = if largest < 0.0 { -1.0 } else { 1.0 };
        basis.extend(col.iter().map(|v| (v * sign) as f32));
    }
    (mean.iter().map(|&m| m as f32).collect(), basis)
}

/// Eigenvalues and eigenvectors (columns of the returned row-major `n × n` matrix) of the
/// symmetric matrix `a` (row-major, `n × n`), by cyclic Jacobi rotations.
fn symmetric_eigen(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0f64; n * n];
    (0..n).for_each(|i| v[i * n + i] = 1.0);
    let scale: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt().max(f64::MIN_POSITIVE);
    for _sweep in 0..50 {
        let off: f64 = (0..n).map(|i| (0..n).filter(|&j| j != i).map(|j| a[i * n + j].powi(2)).sum::<f64>()).sum();
        if off.sqrt() <= 1e-12 * scale {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq.abs() <= 1e-300 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = if theta == 0.0 { 1.0 } else { theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt()) };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedder::{max_sim, unit_token_rows};

    /// Deterministic unit rows of `dim` values and their ids: `n` tokens drawn from 12 ids, each
    /// id's states near its own direction, plus a little context in a few shared ones (as a
    /// sentence model's token states are).
    fn tokens(seed: u64, n: usize, dim: usize) -> (Vec<f32>, Vec<u32>) {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        // [CLS], the tokens, [SEP]: the ends are dropped by `unit_token_rows`.
        let (mut raw, mut ids) = (vec![0f32; dim], Vec::new());
        for _ in 0..n {
            let id = ((next() + 0.5) * 12.0) as u32 % 12;
            let context: Vec<f32> = (0..4).map(|_| next()).collect();
            raw.extend((0..dim).map(|j| {
                let own = if j % 12 == id as usize { 2.0 } else { 0.0 };
                own + 0.6 + context[j % 4] * 0.8 + next() * 0.05
            }));
            ids.push(id);
        }
        raw.extend(vec![0f32; dim]);
        (unit_token_rows(&raw, dim), ids)
    }

    #[test]
    fn eigen_of_a_known_matrix() {
        // [[2, 1], [1, 2]]: eigenvalues 3 and 1.
        let (values, vectors) = symmetric_eigen(vec![2.0, 1.0, 1.0, 2.0], 2);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        assert!((sorted[0] - 1.0).abs() < 1e-9 && (sorted[1] - 3.0).abs() < 1e-9, "{values:?}");
        let big = if values[0] > values[1] { 0 } else { 1 };
        assert!((vectors[big].abs() - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-9);
    }

    #[test]
    fn codes_score_like_the_model_states_and_carry_their_codec() {
        let dim = 24;
        let (rows, ids) = tokens(1, 600, dim);
        let codec = LateCodec::fit(&rows, &ids, dim, 6).unwrap();
        assert_eq!(codec.anchors(), 13, "every id seen, and the mean");
        let (query, _) = tokens(2, 5, dim);
        let mut prepared = codec.query(&query);
        for seed in 3..8 {
            let (doc, doc_ids) = tokens(seed, 30, dim);
            let exact = max_sim(&query, &doc, dim);
            let code = codec.encode(&doc, &doc_ids);
            assert_eq!(code.len(), HEADER + 30 * (6 + 6));
            let approx = codec.max_sim(&mut prepared, &code).unwrap();
            assert!((exact - approx).abs() < 0.02, "seed {seed}: {exact} vs {approx}");
        }
        // Round trip of the codec, and its tag on the codes.
        let again = LateCodec::from_bytes(&codec.to_bytes()).unwrap();
        assert_eq!(again, codec);
        let (other_rows, other_ids) = tokens(9, 600, dim);
        let other = LateCodec::fit(&other_rows, &other_ids, dim, 6).unwrap();
        assert_ne!(other.tag(), codec.tag());
        let (doc, doc_ids) = tokens(3, 4, dim);
        assert!(other.max_sim(&mut other.query(&query), &codec.encode(&doc, &doc_ids)).is_none());
        assert!(LateCodec::from_bytes(b"ctxdlat2\0\0\0\0\0\0\0\0\0\0\0\0").is_err());
        assert_eq!(codec.max_sim(&mut prepared, &codec.encode(&[], &[])), Some(0.0));
        // The full codec: no fitting, the model's scores to within the rounding.
        let full = LateCodec::full(dim);
        let mut prepared_full = full.query(&query);
        let (doc, doc_ids) = tokens(4, 30, dim);
        let code = full.encode(&doc, &doc_ids);
        assert_eq!(code.len(), HEADER + 30 * (6 + dim));
        let (exact, stored) = (max_sim(&query, &doc, dim), full.max_sim(&mut prepared_full, &code).unwrap());
        assert!((exact - stored).abs() < 0.005, "{exact} vs {stored}");
        assert_eq!(LateCodec::from_bytes(&full.to_bytes()).unwrap(), full);
        // An id never seen takes the mean's anchor.
        let unseen = codec.encode(&doc[..dim], &[99]);
        assert_eq!(&unseen[HEADER..HEADER + 2], &[0, 0]);
    }
}
