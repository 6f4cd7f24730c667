//! The element-wise parts of the fast BERT forward pass: embeddings sum, layer norm, softmax,
//! f32 → bf16 conversion, mean pooling. Matrix products go to oneDNN ([`crate::dnnl`]); these
//! loops are the rest.
//!
//! Each kernel is written once as plain Rust and compiled twice: for the baseline target and
//! with AVX2+FMA enabled (picked at run time), so the loops vectorise 8 lanes wide on any
//! x86-64 CPU from the last decade without building ctxd for a specific CPU.

/// Whether the AVX2+FMA variants can run here.
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

macro_rules! dispatch {
    ($(#[$doc:meta])* pub fn $name:ident($($arg:ident: $ty:ty),*) $body:block) => {
        $(#[$doc])*
        pub fn $name(avx2: bool, $($arg: $ty),*) {
            #[inline(always)]
            fn imp($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn fast($($arg: $ty),*) {
                imp($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: `avx2` is only true when the CPU has AVX2 and FMA (`has_avx2`).
                return unsafe { fast($($arg),*) };
            }
            let _ = avx2;
            imp($($arg),*)
        }
    };
}

/// Round-to-nearest-even f32 → bf16 bits (finite inputs).
#[inline(always)]
pub fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    ((bits.wrapping_add(0x7fff + ((bits >> 16) & 1))) >> 16) as u16
}

/// bf16 bits → f32 (exact).
#[inline(always)]
#[cfg(test)]
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// e^x with ~1e-7 relative error for x in [-87, 88] (clamped outside); branch-free so it
/// vectorises.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // 1.5·2²³: adding it rounds to an integer held in the low mantissa bits (no float→int
    // conversion, whose saturation checks would stop vectorisation).
    const SHIFT: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let t = x * std::f32::consts::LOG2_E;
    let big = t + SHIFT;
    let n = big - SHIFT;
    let f = t - n;
    let p = 1.0
        + f * (std::f32::consts::LN_2
            + f * (0.240_226_5
                + f * (0.055_504_11 + f * (0.009_618_129 + f * (0.001_333_355_8 + f * 0.000_154_035_3)))));
    let exponent = big.to_bits().wrapping_sub(SHIFT.to_bits()).wrapping_add(127) << 23;
    p * f32::from_bits(exponent)
}

/// Sum with 16 independent accumulators: float addition is not associative, so a plain
/// `iter().sum()` is a serial chain the compiler must not vectorise.
#[inline(always)]
fn sum(xs: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let chunks = xs.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for i in 0..16 {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// Sum of squared distances to `mean`, vectorised like [`sum`].
#[inline(always)]
fn sq_dev(xs: &[f32], mean: f32) -> f32 {
    let mut acc = [0.0f32; 16];
    let chunks = xs.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().map(|v| (v - mean) * (v - mean)).sum();
    for c in chunks {
        for i in 0..16 {
            let d = c[i] - mean;
            acc[i] += d * d;
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// Maximum (inputs are finite).
#[inline(always)]
fn max(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 16];
    let chunks = xs.chunks_exact(16);
    let mut rest = f32::NEG_INFINITY;
    for &v in chunks.remainder() {
        rest = if v > rest { v } else { rest };
    }
    for c in chunks {
        for i in 0..16 {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    acc.iter().fold(rest, |m, &v| if v > m { v } else { m })
}

/// Slice conversion target: either f32 or bf16 bits.
pub enum Out<'a> {
    F32(&'a mut [f32]),
    Bf16(&'a mut [u16]),
}

impl Out<'_> {
    /// Writes `row` into `range`, converting to bf16 when this is a bf16 buffer.
    #[inline(always)]
    fn store(&mut self, range: std::ops::Range<usize>, row: &[f32]) {
        match self {
            Out::F32(o) => o[range].copy_from_slice(row),
            Out::Bf16(o) => {
                for (d, v) in o[range].iter_mut().zip(row) {
                    *d = bf16_bits(*v);
                }
            }
        }
    }
}

dispatch! {
    /// Layer norm of each `width`-wide row of `x` in place (`x = (x - mean) / sqrt(var + eps)
    /// * gamma + beta`), also writing the result to `copy` (row-major, same shape) as f32 or bf16.
    pub fn layer_norm(x: &mut [f32], width: usize, gamma: &[f32], beta: &[f32], eps: f32, copy: &mut Out) {
        for (r, row) in x.chunks_exact_mut(width).enumerate() {
            let mean = sum(row) / width as f32;
            let var = sq_dev(row, mean);
            let inv = 1.0 / (var / width as f32 + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
                *v = (*v - mean) * inv * g + b;
            }
            let range = r * width..(r + 1) * width;
            copy.store(range, row);
        }
    }
}

dispatch! {
    /// Softmax over the first `valid` columns of each of the first `valid` rows of a
    /// `rows × stride` score matrix, into `out` (same shape); the other columns and rows of
    /// `out` become 0 so padded keys and queries contribute nothing.
    pub fn softmax(scores: &mut [f32], rows: usize, stride: usize, valid: usize, out: &mut Out) {
        for r in 0..rows {
            let row = &mut scores[r * stride..(r + 1) * stride];
            if r < valid {
                let top = max(&row[..valid]);
                for v in row[..valid].iter_mut() {
                    *v = exp(*v - top);
                }
                let inv = 1.0 / sum(&row[..valid]);
                for v in row[..valid].iter_mut() {
                    *v *= inv;
                }
                for v in row[valid..].iter_mut() {
                    *v = 0.0;
                }
            } else {
                row.fill(0.0);
            }
            let range = r * stride..(r + 1) * stride;
            out.store(range, row);
        }
    }
}

dispatch! {
    /// `dst[i] += src[i]`.
    pub fn add_assign(dst: &mut [f32], src: &[f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d += *s;
        }
    }
}

dispatch! {
    /// Mean of `rows` rows of width `width` followed by L2 normalisation (norm clamped at
    /// 1e-12, as sentence-transformers does), into `out`.
    pub fn mean_pool_normalize(x: &[f32], width: usize, out: &mut [f32]) {
        out.fill(0.0);
        let rows = x.len() / width;
        for row in x.chunks_exact(width) {
            for (o, v) in out.iter_mut().zip(row) {
                *o += *v;
            }
        }
        let inv_rows = 1.0 / rows.max(1) as f32;
        let mut norm = 0.0f32;
        for o in out.iter_mut() {
            *o *= inv_rows;
            norm += *o * *o;
        }
        let inv = 1.0 / norm.sqrt().max(1e-12);
        for o in out.iter_mut() {
            *o *= inv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_std() {
        // Softmax feeds it x ≤ 0 near 0, where it must be tight; far out, the rounding of
        // x·log2(e) dominates (still < 1e-5 relative).
        let mut x = -80.0f32;
        while x < 80.0 {
            let (a, b) = (exp(x), x.exp());
            let tol = if x.abs() < 10.0 { 1e-6 } else { 1e-5 };
            assert!(((a - b) / b).abs() < tol, "exp({x}) = {a}, std {b}");
            x += 0.37;
        }
        assert_eq!(exp(-1000.0), exp(-87.0));
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        for v in [1.0f32, -2.5, 3.140625, 1.0e-3, 65504.0, 0.0] {
            let back = bf16_to_f32(bf16_bits(v));
            assert!((back - v).abs() <= v.abs() / 128.0, "{v} -> {back}");
        }
        // 1 + 2^-8 is exactly between two bf16 values: ties go to the even mantissa (1.0).
        assert_eq!(bf16_to_f32(bf16_bits(1.0 + 1.0 / 256.0)), 1.0);
        assert_eq!(bf16_to_f32(bf16_bits(1.0 + 3.0 / 256.0)), 1.0 + 4.0 / 256.0);
    }

    #[test]
    fn softmax_masks_padded_keys_and_queries() {
        for avx2 in [false, has_avx2()] {
            let mut s = vec![1.0, 2.0, 3.0, 100.0, 0.5, 0.5, 9.0, 9.0, 7.0, 7.0, 7.0, 7.0];
            let mut out = vec![9.0f32; 12];
            softmax(avx2, &mut s, 3, 4, 2, &mut Out::F32(&mut out));
            let e = (1.0f32.exp(), 2.0f32.exp());
            assert!((out[0] - e.0 / (e.0 + e.1)).abs() < 1e-6);
            assert_eq!(&out[2..4], &[0.0, 0.0]);
            assert!((out[4] - 0.5).abs() < 1e-6 && (out[5] - 0.5).abs() < 1e-6);
            assert!(out[8..].iter().all(|&v| v == 0.0), "padded query row must be zero");
        }
    }

    #[test]
    fn layer_norm_normalises_rows() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0, 10.0, 10.0, 10.0, 10.0];
        let mut copy = vec![0u16; 8];
        layer_norm(has_avx2(), &mut x, 4, &[1.0; 4], &[0.5; 4], 1e-12, &mut Out::Bf16(&mut copy));
        let mean: f32 = x[..4].iter().sum::<f32>() / 4.0;
        assert!((mean - 0.5).abs() < 1e-6);
        assert!(x[4..].iter().all(|&v| (v - 0.5).abs() < 1e-6), "constant row becomes beta");
        assert_eq!(bf16_to_f32(copy[4]), 0.5);
    }

    #[test]
    fn mean_pool_is_unit_length() {
        let x = vec![3.0, 0.0, 3.0, 8.0];
        let mut out = vec![0.0; 2];
        mean_pool_normalize(has_avx2(), &x, 2, &mut out);
        assert!((out[0] - 0.6).abs() < 1e-6 && (out[1] - 0.8).abs() < 1e-6);
    }
}
