//! Dense layers of [`super::model::Transformer`] on oneDNN, on the CPU: where the library
//! loads ([`crate::dnnl::Dnnl::load`], as for BERT's fast path), each [`super::layers::Linear`]
//! hands its GEMM (≈ 90% of an encoder's work) to a oneDNN matmul in f32 with the bias fused,
//! its weights reordered once into the kernel's blocked layout, one primitive per row count
//! (kept; batches of similar shapes reuse them). candle's CPU GEMM ran these architectures at
//! 0.4–0.5× PyTorch (BENCHMARKS.md, "Other architectures on the CPU"); everything else — attention,
//! norms, rotary, pooling — stays on candle.
//!
//! oneDNN runs its matmuls on OpenMP threads (one per core unless `OMP_NUM_THREADS` says
//! otherwise); the model thread calls one at a time, so no pool is stacked on another.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use candle_core::Tensor;

use crate::dnnl::{self, DataType, Dnnl, Engine, PostOp, Primitive, Weights};
use crate::error::ModelError;

/// Primitives kept per layer before the oldest shapes are dropped (each is a few KB; a
/// re-created one costs well under a millisecond).
const MAX_SHAPES: usize = 256;

/// One dense layer's oneDNN side: its engine, reordered weights, bias and primitives by rows.
pub struct DnnlLinear {
    engine: Engine,
    weights: Weights,
    bias: Option<Vec<f32>>,
    prims: HashMap<usize, Primitive>,
    inp: usize,
    out: usize,
}

impl DnnlLinear {
    /// Wraps a PyTorch-layout weight `(out, in)` and its bias.
    pub fn new(dnnl: &Dnnl, weight: &Tensor, bias: Option<&Tensor>) -> Result<Self, ModelError> {
        let (out, inp) = weight.dims2()?;
        let data = Arc::new(weight.flatten_all()?.to_vec1::<f32>()?);
        let bias = bias.map(|b| b.to_vec1::<f32>()).transpose()?;
        Ok(Self {
            engine: dnnl.engine()?,
            weights: Weights::from_linear(dnnl, data, out, inp)?,
            bias,
            prims: HashMap::new(),
            inp,
            out,
        })
    }

    fn prim(&mut self, rows: usize) -> Result<(), ModelError> {
        if self.prims.contains_key(&rows) {
            return Ok(());
        }
        if self.prims.len() >= MAX_SHAPES {
            self.prims.clear();
        }
        let dnnl = self.engine.dnnl().clone();
        let (m, k, n) = (rows as i64, self.inp as i64, self.out as i64);
        let bias = self.bias.as_ref().map(|_| dnnl.dense(&[1, n], DataType::F32)).transpose()?;
        let prim = self.engine.matmul(
            dnnl.dense(&[m, k], DataType::F32)?,
            dnnl.any(&[k, n], DataType::F32)?,
            bias,
            dnnl.dense(&[m, n], DataType::F32)?,
            PostOp::None,
        )?;
        self.prims.insert(rows, prim);
        Ok(())
    }

    /// `x · Wᵀ + b` for `x` of `rows × in` values, row-major; `rows × out` values back.
    pub fn forward(&mut self, x: &[f32], rows: usize) -> Result<Vec<f32>, ModelError> {
        if x.len() != rows * self.inp {
            return Err(ModelError::Backend(format!("dense input has {} values, not {rows} × {}", x.len(), self.inp)));
        }
        self.prim(rows)?;
        let prim = &self.prims[&rows];
        let weights = self.weights.for_primitive(&self.engine, prim)?;
        let mut out = vec![0.0f32; rows * self.out];
        let mut args: Vec<(i32, *const c_void)> = vec![
            (dnnl::ARG_SRC, x.as_ptr().cast()),
            (dnnl::ARG_WEIGHTS, weights),
            (dnnl::ARG_DST, out.as_mut_ptr().cast_const().cast()),
        ];
        if let Some(b) = &self.bias {
            args.push((dnnl::ARG_BIAS, b.as_ptr().cast()));
        }
        // SAFETY: `x` holds rows × in values and `out` rows × out (checked and allocated above),
        // the bias `out` values, the weights the primitive's layout; all live through the call.
        unsafe { self.engine.execute(prim, &args)? };
        Ok(out)
    }
}
