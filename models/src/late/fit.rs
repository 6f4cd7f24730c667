//! The math a fitted codec is made with ([`super::LateCodec::fit`]): word-piece anchors (the mean
//! state of each token id) and the principal directions of the offsets from them (the top
//! eigenvectors of their covariance, by cyclic Jacobi rotations in f64).

use std::collections::HashMap;

/// Anchors a codec holds at most (a code names one in 16 bits).
pub(super) const MAX_ANCHORS: usize = u16::MAX as usize;
/// Occurrences a token id needs in the fitting text for an anchor of its own.
pub(super) const MIN_ANCHOR_COUNT: usize = 3;
/// The token id anchor 0 (the mean of all states) stands for.
pub(super) const EVERY_ID: u32 = u32::MAX;

/// The anchors of `rows` by their `ids`: anchor 0 the mean of every row ([`EVERY_ID`]), then
/// one per id seen at least [`MIN_ANCHOR_COUNT`] times (the mean of its rows), by id, at most
/// [`MAX_ANCHORS`] (the most frequent ids first when there are more).
pub(super) fn fit_anchors(rows: &[f32], ids: &[u32], dim: usize) -> (Vec<u32>, Vec<f32>) {
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
pub(super) fn principal_directions(rows: &[f32], dim: usize, k: usize) -> (Vec<f32>, Vec<f32>) {
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
}
