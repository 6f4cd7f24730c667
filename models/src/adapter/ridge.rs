//! The ridge fit of a query adapter: the closed-form
//!
//! ```text
//! W = argmin |Q W − T|² + λ |W − I|²  =  (QᵀQ + λI)⁻¹ (QᵀT + λI)
//! ```
//!
//! with `Q` the messages' query vectors and `T` each one's target (the unit mean of its changed
//! files' vectors), by a Cholesky solve in f64: 10,000 commits fit in about a second of one core
//! (a few hundred in 0.15 s). The fit used: on the localization training repositories it ranked
//! issues' files better than the contrastive fit on two of three (BENCHMARKS.md, "Issue 86").

/// `W` (row-major `dim × dim`) for `queries` onto `targets` (both row-major, `dim` wide) at
/// strength `lambda`, or `None` when the normal equations are not positive definite.
pub fn fit(queries: &[f32], targets: &[f32], dim: usize, lambda: f32) -> Option<Vec<f32>> {
    let lam = f64::from(lambda);
    // A = QᵀQ + λI and B = QᵀT + λI, accumulated row by row in f64.
    let mut a = vec![0f64; dim * dim];
    let mut b = vec![0f64; dim * dim];
    for (q, t) in queries.chunks_exact(dim).zip(targets.chunks_exact(dim)) {
        for (i, &qi) in q.iter().enumerate() {
            let qi = f64::from(qi);
            let (arow, brow) = (&mut a[i * dim..(i + 1) * dim], &mut b[i * dim..(i + 1) * dim]);
            for ((av, bv), (&qj, &tj)) in arow.iter_mut().zip(brow.iter_mut()).zip(q.iter().zip(t)) {
                *av += qi * f64::from(qj);
                *bv += qi * f64::from(tj);
            }
        }
    }
    for i in 0..dim {
        a[i * dim + i] += lam;
        b[i * dim + i] += lam;
    }
    let l = cholesky(&a, dim)?;
    Some(solve_columns(&l, &b, dim).into_iter().map(|v| v as f32).collect())
}

/// The lower-triangular `L` with `L Lᵀ = a` (row-major), or `None` when `a` is not positive definite.
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0f64; n * n];
    for i in 0..n {
        for j in 0..=i {
            let dot: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            let v = a[i * n + j] - dot;
            if i == j {
                if v <= 0.0 || !v.is_finite() {
                    return None;
                }
                l[i * n + i] = v.sqrt();
            } else {
                l[i * n + j] = v / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// `X` with `L Lᵀ X = b` (all row-major `n × n`), column by column.
fn solve_columns(l: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut x = vec![0f64; n * n];
    let mut y = vec![0f64; n];
    for c in 0..n {
        for i in 0..n {
            let dot: f64 = (0..i).map(|k| l[i * n + k] * y[k]).sum();
            y[i] = (b[i * n + c] - dot) / l[i * n + i];
        }
        for i in (0..n).rev() {
            let dot: f64 = (i + 1..n).map(|k| l[k * n + i] * x[k * n + c]).sum();
            x[i * n + c] = (y[i] - dot) / l[i * n + i];
        }
    }
    x
}
