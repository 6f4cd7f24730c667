//! Late-interaction codes: a chunk's token states computed once at index time, stored with the
//! chunk, and scored against a query's token states by MaxSim without a forward pass.
//!
//! Rescoring ([`crate::embedder::max_sim`]) compares every query token's unit state `q` with every
//! chunk token's unit state `d` and keeps each query token's best cosine. What indexing stores by
//! default is [`LateCodec::packed`] at [`DEFAULT_BITS`]: every token's `dim` values at 6 bits with
//! a scale ([`pack`]), `3 dim / 4 + 6` bytes a token (294 for MiniLM's 384, against 1,536 as
//! floats) — the scores are the model's to within the rounding (the real-weights test holds them
//! within 0.005; 0.0014 measured), and rescoring from them ranks as the model does.
//! [`LateCodec::full`] — 8 bits, `dim + 6` bytes a token, the default before — is still read (an
//! index written with it keeps its rescoring) and written when `CTXD_LATE_CODEC=full`.
//!
//! **Fewer tokens**: [`LateCodec::words`] leaves out the tokens that are punctuation, as ColBERT
//! masks them in documents: in code they are ~40% of the tokens (CoSQA: 100.6 → 59.9 a chunk;
//! SciFact's abstracts 13%). Measured (BENCHMARKS.md "Late interaction paid at index time"):
//! SciFact train routed nDCG@10 0.7371 as with every token (6 bits), CoSQA dev 0.6010 against
//! 0.6032 — a loss, so it is a setting (`CTXD_LATE_CODEC=words`) for an index short of disk, not
//! the default. At 4 bits (`words4`, `4bit`) SciFact lost 0.0013.
//!
//! **Compressed codecs** (fitted: [`LateCodec::fit`], `ctxd bench --fit-late`; measured by naming
//! the file in `CTXD_LATE_CODEC`) keep a token as its word piece's **anchor** — the mean state of
//! that token id over the fitting text (an id seen fewer than [`fit::MIN_ANCHOR_COUNT`] times takes the
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
use fit::{fit_anchors, principal_directions, EVERY_ID, MAX_ANCHORS};

mod fit;
pub(crate) mod pack;

pub use pack::quantize_rows;
use pack::{dot, quantize_packed, row_bytes, unpack_row, BITS};

/// Bytes at the head of a code: the codec's tag (4), the token count (2), `k` (2).
const HEADER: usize = 8;
/// The serialised codec's first bytes: 8-bit codes of every token ...
const MAGIC: &[u8; 8] = b"ctxdlat2";
/// ... or with its bits a value and the token ids it does not store after the fields above.
const MAGIC_PACKED: &[u8; 8] = b"ctxdlat3";
/// Tokens a code holds at most (the header's count is 16 bits; windows are far shorter).
const MAX_TOKENS: usize = u16::MAX as usize;

/// The variable naming a codec file to use instead of the shipped ones ([`LateCodec::shipped`]),
/// or a built-in codec ([`BUILT_IN`], [`LateCodec::for_model`]), or `none`.
pub const CODEC_ENV: &str = "CTXD_LATE_CODEC";
/// The codecs `CTXD_LATE_CODEC` names without a file.
pub const BUILT_IN: [&str; 5] = ["6bit", "full", "4bit", "words", "words4"];
/// Bits a value takes in the codes indexing stores by default ([`LateCodec::for_model`]).
pub const DEFAULT_BITS: u8 = 6;

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
    /// Bits a stored value takes, 4 to 8 ([`pack`]).
    bits: u8,
    /// Token ids whose rows are not stored (sorted): punctuation, for [`LateCodec::words`].
    dropped: Vec<u32>,
    tag: u32,
    /// The tag of [`LateCodec::full`]'s codes of the same `dim`, which an identity codec reads
    /// too (an index written before it keeps its rescoring); `None` for the full codec itself
    /// and fitted ones (derived).
    full_tag: Option<u32>,
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
            if path == "none" || BUILT_IN.contains(&path.to_str().unwrap_or_default()) {
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

    /// [`LateCodec::full`]'s values at `bits` (4 to 8), without the rows of the token ids in
    /// `dropped`. It reads the full codec's codes too.
    pub fn packed(dim: usize, bits: u8, dropped: &[u32]) -> Self {
        let mut dropped = dropped.to_vec();
        dropped.sort_unstable();
        dropped.dedup();
        let mut codec = Self::full(dim);
        codec.bits = bits.clamp(*BITS.start(), *BITS.end());
        codec.dropped = dropped;
        codec.retag();
        codec
    }

    /// [`LateCodec::packed`] at [`DEFAULT_BITS`] without the tokens that are punctuation
    /// (`punctuation`: their ids, [`crate::service::EmbedService::punctuation`]), as ColBERT masks
    /// them in documents: a code corpus's codes 40% smaller, for a small loss (module docs).
    pub fn words(dim: usize, punctuation: &[u32]) -> Self {
        Self::packed(dim, DEFAULT_BITS, punctuation)
    }

    /// The codec chunks embedded by `model_id` (`dim`-dimension token states, `punctuation` the
    /// ids of its punctuation tokens) are stored with: what `CTXD_LATE_CODEC` names — `none`,
    /// one of [`BUILT_IN`] (`6bit`, `full`, `4bit`: every token at 6, 8 or 4 bits; `words`,
    /// `words4`: [`LateCodec::words`] at 6 or 4 bits) or a fitted codec's file being measured —
    /// else every token at [`DEFAULT_BITS`].
    pub fn for_model(model_id: &str, dim: usize, punctuation: &[u32]) -> Option<Self> {
        match std::env::var(CODEC_ENV).as_deref() {
            Ok("6bit") | Err(std::env::VarError::NotPresent) => Some(Self::packed(dim, DEFAULT_BITS, &[])),
            Ok("full") => Some(Self::full(dim)),
            Ok("4bit") => Some(Self::packed(dim, 4, &[])),
            Ok("words") => Some(Self::words(dim, punctuation)),
            Ok("words4") => Some(Self::packed(dim, 4, punctuation)),
            _ => Self::shipped(model_id, dim),
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
        let mut codec = Self {
            dim,
            k,
            ids,
            anchor_of,
            anchor_scales,
            anchor_bytes,
            anchors,
            mean,
            basis,
            identity,
            bits: 8,
            dropped: Vec::new(),
            tag: 0,
            full_tag: None,
        };
        codec.retag();
        codec
    }

    /// Sets the tag from the serialised form, and the full codec's for an identity codec that
    /// is not it.
    fn retag(&mut self) {
        let hash = blake3::hash(&self.to_bytes());
        self.tag = u32::from_le_bytes(hash.as_bytes()[..4].try_into().unwrap_or_default());
        self.full_tag = (self.identity && !self.is_plain()).then(|| Self::full(self.dim).tag);
    }

    /// 8 bits and every token stored: serialised in the first form ([`MAGIC`]).
    fn is_plain(&self) -> bool {
        self.bits == 8 && self.dropped.is_empty()
    }

    /// Bytes a stored token row's values take.
    fn row_bytes(&self) -> usize {
        row_bytes(self.k, self.bits)
    }

    /// Whether the rows of token `id` are left out of codes.
    fn drops(&self, id: u32) -> bool {
        self.dropped.binary_search(&id).is_ok()
    }

    /// The state dimension it takes.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Directions kept (values a token, besides its anchor and scale).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Bits a stored value takes (8 or 4).
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// Token ids whose rows codes leave out.
    pub fn dropped(&self) -> &[u32] {
        &self.dropped
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
    /// (u32 LE), their scales (f32 LE) and bytes, the mean offset and the basis (f32 LE); then,
    /// unless it stores every token at 8 bits ([`MAGIC_PACKED`]), the bits, the count of dropped
    /// token ids and those ids (u32 LE).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.ids.len() * (8 + self.dim) + 4 * self.dim * (self.k + 1));
        out.extend_from_slice(if self.is_plain() { MAGIC } else { MAGIC_PACKED });
        for word in [self.dim, self.k, self.ids.len()] {
            out.extend_from_slice(&(word as u32).to_le_bytes());
        }
        self.ids.iter().for_each(|id| out.extend_from_slice(&id.to_le_bytes()));
        self.anchor_scales.iter().for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
        out.extend(self.anchor_bytes.iter().map(|&b| b as u8));
        for v in self.mean.iter().chain(&self.basis) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        if !self.is_plain() {
            for word in [u32::from(self.bits), self.dropped.len() as u32].iter().chain(&self.dropped) {
                out.extend_from_slice(&word.to_le_bytes());
            }
        }
        out
    }

    /// Reads [`LateCodec::to_bytes`]'s form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
        let bad = |why: String| ModelError::Backend(format!("late-interaction codec: {why}"));
        let packed = bytes.len() >= 20 && &bytes[..8] == MAGIC_PACKED;
        if bytes.len() < 20 || (&bytes[..8] != MAGIC && !packed) {
            return Err(bad("not a codec (wrong magic)".into()));
        }
        let word = |at: usize| {
            bytes.get(at..at + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
        };
        let (dim, k, n) = (word(8), word(12), word(16));
        // Codes hold `k` in 16 bits: bounding the header's words first keeps the sizes below from
        // overflowing whatever a file says.
        if dim == 0 || dim > usize::from(u16::MAX) || k == 0 || k > dim || n == 0 || n > MAX_ANCHORS {
            return Err(bad(format!("dim {dim}, k {k}, {n} anchors: out of range")));
        }
        let base = 20 + n * (8 + dim) + 4 * dim * (k + 1);
        let (bits, dropped) = if packed { (word(base), word(base + 4)) } else { (8, 0) };
        let expected = if packed { dropped.checked_mul(4).and_then(|d| d.checked_add(base + 8)) } else { Some(base) };
        if Some(bytes.len()) != expected || !u8::try_from(bits).is_ok_and(|b| BITS.contains(&b)) {
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
        let mut codec = Self::assemble(dim, k, ids, scales, anchor_bytes, mean.to_vec(), basis.to_vec());
        if packed {
            codec.bits = u8::try_from(bits).unwrap_or(8);
            codec.dropped = (0..dropped).map(|i| word(base + 8 + 4 * i) as u32).collect();
            codec.dropped.sort_unstable();
            codec.dropped.dedup();
            codec.retag();
        }
        Ok(codec)
    }

    /// The code of one chunk's unit token rows and their token ids: the header, each stored
    /// token's anchor (u16 LE), scale (f32 LE), then its `k` values at [`LateCodec::bits`]. The
    /// rows of dropped ids are left out, unless every row would be.
    pub fn encode(&self, rows: &[f32], ids: &[u32]) -> Vec<u8> {
        let n = (rows.len() / self.dim).min(ids.len()).min(MAX_TOKENS);
        let mut kept: Vec<usize> = (0..n).filter(|&i| !self.drops(ids[i])).collect();
        if kept.is_empty() {
            kept = (0..n).collect();
        }
        let mut out = Vec::with_capacity(HEADER + kept.len() * (6 + self.row_bytes()));
        out.extend_from_slice(&self.tag.to_le_bytes());
        out.extend_from_slice(&(kept.len() as u16).to_le_bytes());
        out.extend_from_slice(&(self.k as u16).to_le_bytes());
        let anchors: Vec<u16> = kept.iter().map(|&i| self.anchor_index(ids[i])).collect();
        anchors.iter().for_each(|a| out.extend_from_slice(&a.to_le_bytes()));
        let mut offsets = Vec::with_capacity(kept.len() * self.k);
        let mut offset = vec![0f32; self.dim];
        let mut proj = vec![0f32; self.k];
        for (&i, &a) in kept.iter().zip(&anchors) {
            let row = &rows[i * self.dim..(i + 1) * self.dim];
            for (((o, v), an), m) in offset.iter_mut().zip(row).zip(self.anchor_at(a)).zip(&self.mean) {
                *o = v - an - m;
            }
            self.project(&offset, &mut proj);
            offsets.extend_from_slice(&proj);
        }
        let (scales, bytes) = quantize_packed(&offsets, self.k, self.bits);
        scales.iter().for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
        out.extend_from_slice(&bytes);
        out
    }

    /// `B row` into `out`.
    fn project(&self, row: &[f32], out: &mut [f32]) {
        if self.identity {
            out.copy_from_slice(&row[..self.dim]);
            return;
        }
        for (o, b) in out.iter_mut().zip(self.basis.chunks_exact(self.dim)) {
            *o = dot(row, b);
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

    /// Whether this codec scores `code`: written by it, or by [`LateCodec::full`] when this is
    /// an identity codec of the same `dim` (its tag, shape and anchors).
    pub fn reads(&self, code: &[u8]) -> bool {
        self.code_bits(code).is_some()
    }

    /// The bits `code`'s values take when this codec scores it ([`LateCodec::reads`]).
    fn code_bits(&self, code: &[u8]) -> Option<u8> {
        let tag = u32::from_le_bytes(code.get(..4)?.try_into().ok()?);
        let bits = match tag {
            t if t == self.tag => self.bits,
            t if Some(t) == self.full_tag => 8,
            _ => return None,
        };
        let n = u16::from_le_bytes([*code.get(4)?, *code.get(5)?]) as usize;
        let k = u16::from_le_bytes([*code.get(6)?, *code.get(7)?]) as usize;
        let fits = k == self.k
            && code.len() == HEADER + n * (6 + row_bytes(k, bits))
            && code[HEADER..HEADER + 2 * n]
                .chunks_exact(2)
                .all(|a| usize::from(u16::from_le_bytes([a[0], a[1]])) < self.ids.len());
        fits.then_some(bits)
    }

    /// MaxSim of a prepared query against a code of this codec (see the module docs): the mean
    /// over query tokens of each one's best approximate cosine with the chunk's tokens. `None`
    /// for a code this codec did not write; 0 for an empty query or code.
    pub fn max_sim(&self, query: &mut LateQuery, code: &[u8]) -> Option<f32> {
        let bits = self.code_bits(code)?;
        if query.proj.len() != query.bias.len() * self.k {
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
        let mut values = Vec::with_capacity(n * self.k);
        code[at + 4 * n..].chunks_exact(row_bytes(self.k, bits)).for_each(|r| unpack_row(r, self.k, bits, &mut values));
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

    #[test]
    fn packed_codes_drop_their_tokens_and_read_the_full_codes() {
        let dim = 24;
        let (query, _) = tokens(2, 5, dim);
        let (doc, ids) = tokens(4, 30, dim);
        let dropped = [3, 7];
        let words = LateCodec::words(dim, &dropped);
        assert_eq!((words.bits(), words.dropped()), (DEFAULT_BITS, &dropped[..]));
        let code = words.encode(&doc, &ids);
        let kept: Vec<usize> = (0..30).filter(|&i| !dropped.contains(&ids[i])).collect();
        assert!(kept.len() < 30, "the fixture has dropped ids");
        assert_eq!(code.len(), HEADER + kept.len() * (6 + dim * usize::from(DEFAULT_BITS) / 8));
        // Its MaxSim is the model's over the tokens it keeps, within the rounding.
        let kept_rows: Vec<f32> = kept.iter().flat_map(|&i| doc[i * dim..(i + 1) * dim].to_vec()).collect();
        let exact = max_sim(&query, &kept_rows, dim);
        let stored = words.max_sim(&mut words.query(&query), &code).unwrap();
        assert!((exact - stored).abs() < 0.02, "{exact} vs {stored}");
        // A chunk of dropped tokens only keeps them all.
        let all_dropped = words.encode(&doc[..2 * dim], &[3, 7]);
        assert_eq!(u16::from_le_bytes([all_dropped[4], all_dropped[5]]), 2);
        // The full codec's codes (an index written before) are read; a fitted codec's are not.
        let full = LateCodec::full(dim);
        let old = full.encode(&doc, &ids);
        let (by_full, by_words) = (
            full.max_sim(&mut full.query(&query), &old).unwrap(),
            words.max_sim(&mut words.query(&query), &old).unwrap(),
        );
        assert_eq!(by_full, by_words);
        assert!(full.max_sim(&mut full.query(&query), &code).is_none(), "the full codec reads only its own");
        let (rows, fit_ids) = tokens(1, 600, dim);
        let fitted = LateCodec::fit(&rows, &fit_ids, dim, 6).unwrap();
        assert!(!words.reads(&fitted.encode(&doc, &ids)));
        // Its serialised form round-trips, and the tag follows what it drops and its bits.
        assert_eq!(LateCodec::from_bytes(&words.to_bytes()).unwrap(), words);
        assert_ne!(LateCodec::words(dim, &[3]).tag(), words.tag());
        assert_ne!(LateCodec::packed(dim, 8, &dropped).tag(), words.tag());
        assert!(LateCodec::from_bytes(&words.to_bytes()[..words.to_bytes().len() - 4]).is_err());
        // A header whose sizes would overflow is refused, not trusted (a 27-byte file once passed
        // the length check in a release build).
        for (magic, dim, k) in
            [(MAGIC, u32::MAX, (1u32 << 30) - 1), (MAGIC_PACKED, u32::MAX, u32::MAX), (MAGIC, 70_000, 1)]
        {
            let mut hostile = magic.to_vec();
            [dim, k, 1].iter().for_each(|w| hostile.extend_from_slice(&w.to_le_bytes()));
            hostile.extend_from_slice(&[0; 15]);
            assert!(LateCodec::from_bytes(&hostile).is_err(), "dim {dim}, k {k}");
        }
    }

    /// Indexes written with the full codec carry its tag: it must not move, or their codes would
    /// no longer be read (rescoring would fall back to the model).
    #[test]
    fn the_full_codecs_tag_is_stable() {
        assert_eq!(format!("{:08x}", LateCodec::full(384).tag()), "07116c45");
        assert_eq!(LateCodec::packed(384, 8, &[]), LateCodec::full(384));
    }
}
