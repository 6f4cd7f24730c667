//! How a code's values are laid out: a scale per token row and its values at 4 to 8 bits (at 8
//! one signed byte each; below, packed little-endian), and the dot product every MaxSim is made
//! of ([`dot`], in eight lanes).
//!
//! A value's rounding error is up to half a level, `max / (2^bits − 2)` of its row's largest
//! value. Measured on SciFact's stored token states (a 12-token query against chunks, as
//! `ctxd bench --fit-late` pairs them), the MaxSim moves by 0.0005 on average at 6 bits, 0.0011 at
//! 5 and 0.0022 at 4; clipping the rows at 2.5–3.5 standard deviations or Lloyd-Max levels made
//! it worse (the best-matching values are the large ones). At 4 bits routed nDCG@10 fell by
//! 0.0013 on SciFact train (BENCHMARKS.md "Late interaction paid at index time").

/// The dot product of two rows, summed in eight lanes: a plain `zip().sum()` adds in order, one
/// value at a time (floating-point addition may not be reordered), while eight independent sums
/// are kept in SIMD registers — the MaxSim of a question's 30 candidates is a few million of
/// these products.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
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

/// Bits a stored value may take ([`quantize_packed`]).
pub(super) const BITS: std::ops::RangeInclusive<u8> = 4..=8;

/// Bytes one row of `width` values takes at `bits`.
pub(super) fn row_bytes(width: usize, bits: u8) -> usize {
    (width * usize::from(bits)).div_ceil(8)
}

/// Rows of `width` values at `bits` (one of [`BITS`]; 8: [`quantize_rows`]): a scale per row
/// (its largest value is level ±(2^(bits−1) − 1)) and the rows' bytes, [`row_bytes`] each, the
/// levels' two's complement forms packed little-endian, first value in the lowest bits.
pub(super) fn quantize_packed(rows: &[f32], width: usize, bits: u8) -> (Vec<f32>, Vec<u8>) {
    if bits == 8 {
        let (scales, bytes) = quantize_rows(rows, width);
        return (scales, bytes.iter().map(|&b| b as u8).collect());
    }
    let width = width.max(1);
    let top = f32::from((1u8 << (bits - 1)) - 1);
    let mask = (1u32 << bits) - 1;
    let mut scales = Vec::with_capacity(rows.len() / width);
    let mut bytes = Vec::with_capacity(rows.len() / width * row_bytes(width, bits));
    for row in rows.chunks_exact(width) {
        let max = row.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-12);
        scales.push(max / top);
        let (mut acc, mut held) = (0u32, 0u8);
        for &v in row {
            let level = ((v / max * top).round()).clamp(-top, top) as i32;
            acc |= (level as u32 & mask) << held;
            held += bits;
            while held >= 8 {
                bytes.push(acc as u8);
                acc >>= 8;
                held -= 8;
            }
        }
        if held > 0 {
            bytes.push(acc as u8);
        }
    }
    (scales, bytes)
}

/// One stored row's `width` values (levels, before its scale) from its [`row_bytes`] at `bits`,
/// appended to `out`.
pub(super) fn unpack_row(row: &[u8], width: usize, bits: u8, out: &mut Vec<f32>) {
    if bits == 8 {
        out.extend(row[..width].iter().map(|&b| f32::from(b as i8)));
        return;
    }
    let shift = 32 - u32::from(bits);
    let (mut acc, mut held, mut bytes) = (0u32, 0u8, row.iter());
    for _ in 0..width {
        while held < bits {
            acc |= u32::from(bytes.next().copied().unwrap_or(0)) << held;
            held += 8;
        }
        // Sign-extend the low `bits` bits.
        out.push(((acc << shift) as i32 >> shift) as f32);
        acc >>= bits;
        held -= bits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_within_their_step_at_every_width() {
        let row: Vec<f32> = (0..13).map(|i| ((i * 7) % 13) as f32 / 6.0 - 1.0).collect();
        for bits in BITS {
            let (scales, bytes) = quantize_packed(&row, 13, bits);
            assert_eq!(bytes.len(), row_bytes(13, bits), "{bits} bits");
            let mut back = Vec::new();
            unpack_row(&bytes, 13, bits, &mut back);
            assert_eq!(back.len(), 13);
            for (v, b) in row.iter().zip(&back) {
                assert!((v - b * scales[0]).abs() <= scales[0] / 2.0 + 1e-6, "{bits} bits: {v} vs {}", b * scales[0]);
            }
            let top = f32::from((1u8 << (bits - 1)) - 1);
            assert_eq!(back.iter().fold(0f32, |m, v| m.max(v.abs())), top, "{bits} bits: the largest is the top level");
        }
    }

    #[test]
    fn the_lanes_sum_like_an_ordered_sum() {
        let a: Vec<f32> = (0..13).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..13).map(|i| 1.0 - i as f32 * 0.1).collect();
        let ordered: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - ordered).abs() < 1e-4);
    }
}
