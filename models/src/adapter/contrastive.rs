//! The contrastive fit of a query adapter: `W`, from the identity, raising each commit's
//! probability of its changed files among all files (a softmax over the cosines of the adapted
//! message vector with the file vectors, × [`TAU`]), with `λ |W − I|²` pulling it back; Adam on
//! mini-batches of [`BATCH`] commits for [`STEPS`] steps, on candle's CPU matrix products.
//!
//! Unlike the ridge fit, which pulls each message toward the mean of its files, this one also
//! pushes it away from every other file. On the localization training repositories it ranked
//! issues' files far better than the ridge fit on dask and worse than the base on yt-dlp
//! (BENCHMARKS.md, "Issue 86"), so it is measured, not used (`CANDIDATES` holds the ridge fit).
//! Its cost is `STEPS × BATCH × files × dim` multiply-adds, twice: whatever the number of
//! commits, about 2·10¹¹ for 5,000 files (tens of seconds of one core).

use candle_core::{Device, Tensor};

/// Softmax temperature (the cosine scale of the training loss; sentence-transformers' 20).
pub const TAU: f32 = 20.0;
/// Commits per step.
pub const BATCH: usize = 256;
/// Steps.
pub const STEPS: usize = 150;
/// Adam's step size.
const LR: f32 = 0.002;

/// The fitted `W` (row-major `dim × dim`) for `queries` (row-major, unit rows) whose positives
/// are `positives` (indexes into `files`, row-major unit rows), at pull strength `lambda`.
/// Deterministic for a given `seed`.
pub fn fit(
    queries: &[f32],
    positives: &[Vec<usize>],
    files: &[f32],
    dim: usize,
    lambda: f32,
    seed: u64,
) -> candle_core::Result<Vec<f32>> {
    let cpu = Device::Cpu;
    let n = positives.len();
    let n_files = files.len() / dim;
    let f = Tensor::from_slice(files, (n_files, dim), &cpu)?;
    let ft = f.t()?.contiguous()?;
    let mut w: Vec<f32> = identity(dim);
    let (mut m, mut v) = (vec![0f32; dim * dim], vec![0f32; dim * dim]);
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let batch = BATCH.min(n);
    for step in 1..=STEPS {
        let picked = sample(&mut rng, n, batch);
        let qb: Vec<f32> = picked.iter().flat_map(|&i| queries[i * dim..(i + 1) * dim].iter().copied()).collect();
        let mut mask = vec![0f32; batch * n_files];
        for (row, &i) in picked.iter().enumerate() {
            for &p in &positives[i] {
                mask[row * n_files + p] = 1.0;
            }
        }
        let qb = Tensor::from_vec(qb, (batch, dim), &cpu)?;
        let wt = Tensor::from_slice(&w, (dim, dim), &cpu)?;
        let z = qb.matmul(&wt)?;
        let nz = z.sqr()?.sum_keepdim(1)?.sqrt()?;
        let zu = z.broadcast_div(&nz)?;
        let s = (zu.matmul(&ft)? * f64::from(TAU))?;
        let s = s.broadcast_sub(&s.max_keepdim(1)?)?;
        let e = s.exp()?;
        let p_all = e.broadcast_div(&e.sum_keepdim(1)?)?;
        let ep = (&e * Tensor::from_vec(mask, (batch, n_files), &cpu)?)?;
        let p_pos = ep.broadcast_div(&ep.sum_keepdim(1)?.clamp(1e-30f32, f32::MAX)?)?;
        // d loss / d zu, then through the normalisation: (g − (g·zu) zu) / |z|.
        let g = ((p_all - p_pos)?.matmul(&f)? * f64::from(TAU))?;
        let along = (&g * &zu)?.sum_keepdim(1)?;
        let g = (g - zu.broadcast_mul(&along)?)?.broadcast_div(&nz)?;
        let grad: Vec<f32> = (qb.t()?.matmul(&g)? / batch as f64)?.flatten_all()?.to_vec1()?;
        adam(&mut w, &grad, (&mut m, &mut v), step, lambda, dim);
    }
    Ok(w)
}

/// One Adam step of `w` on `grad` plus the pull `2λ (W − I)`.
fn adam(w: &mut [f32], grad: &[f32], (m, v): (&mut [f32], &mut [f32]), step: usize, lambda: f32, dim: usize) {
    let (b1, b2) = (0.9f32, 0.999f32);
    let (c1, c2) = (1.0 - b1.powi(step as i32), 1.0 - b2.powi(step as i32));
    for (k, ((wk, &gk), (mk, vk))) in w.iter_mut().zip(grad).zip(m.iter_mut().zip(v.iter_mut())).enumerate() {
        let eye = if k % (dim + 1) == 0 { 1.0 } else { 0.0 };
        let g = gk + 2.0 * lambda * (*wk - eye);
        *mk = b1 * *mk + (1.0 - b1) * g;
        *vk = b2 * *vk + (1.0 - b2) * g * g;
        *wk -= LR * (*mk / c1) / ((*vk / c2).sqrt() + 1e-8);
    }
}

/// The identity, row-major `dim × dim`.
pub fn identity(dim: usize) -> Vec<f32> {
    let mut w = vec![0f32; dim * dim];
    for i in 0..dim {
        w[i * dim + i] = 1.0;
    }
    w
}

/// `k` distinct indexes below `n` (a partial Fisher–Yates shuffle with xorshift).
fn sample(rng: &mut u64, n: usize, k: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    for i in 0..k {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let j = i + (*rng % (n - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(k);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_moves_messages_toward_their_files_and_away_from_others() {
        // Four files on the axes; each message points at the next file more than at its own,
        // which it changed.
        let dim = 4;
        let files = identity(dim);
        let mut queries = Vec::new();
        let mut positives = Vec::new();
        for i in 0..64 {
            let k = i % dim;
            let mut q = vec![0.05f32; dim];
            q[(k + 1) % dim] = 1.0;
            q[k] = 0.8;
            let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt();
            queries.extend(q.iter().map(|x| x / norm));
            positives.push(vec![k]);
        }
        let w = fit(&queries, &positives, &files, dim, 0.0, 1).unwrap();
        // Such a message now scores its own file (what such commits changed) highest.
        let q = [0.8f32, 1.0, 0.05, 0.05];
        let out: Vec<f32> = (0..dim).map(|j| (0..dim).map(|i| q[i] * w[i * dim + j]).sum()).collect();
        let best = (0..dim).max_by(|&a, &b| out[a].total_cmp(&out[b])).unwrap();
        assert_eq!(best, 0, "{out:?}");
        // A strong pull keeps the identity.
        let kept = fit(&queries, &positives, &files, dim, 1e4, 1).unwrap();
        assert!(kept.iter().zip(identity(dim)).all(|(a, b)| (a - b).abs() < 0.05), "{kept:?}");
    }
}
