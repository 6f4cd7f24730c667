//! The encoder's operations between its GEMMs, each fused into one CUDA kernel where that runs
//! (a CUDA build, a tensor on the GPU, f16 or f32; the kernels are `encoder_kernels.cu`, compiled
//! to PTX by `models/build.rs`) and composed of candle's own operations everywhere else (the CPU,
//! bf16). Both give the same numbers up to rounding; the reference tests check the composed
//! path on the CPU and `scripts/gpu-check.sh` checks the fused one against the same reference
//! vectors on a GPU.
//!
//! Why fused: on an H200 (Nsight Compute, batch 128, f16) candle's generic element-wise add —
//! which adds a bias over rows through a per-element index computation — took 52% of the
//! encoder's time, its strided copies 16%, its softmax 11% and its GELU 7%; the GEMMs 8%.
//! Fused, a bias is added in the pass that already reads the GEMM's output: with the copy into
//! head-major order (`qkv_heads`), with the activation (`bias_act`), with the residual and the
//! layer norm (`bias_residual_norm`); padding is masked inside the softmax (`masked_softmax`)
//! instead of by an added bias.

use candle_core::{Result, Tensor};

/// The activation of the intermediate layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact, erf-based GELU.
    GeluErf,
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`: the tanh approximation.
    GeluTanh,
    Relu,
}

impl Activation {
    /// The activation a `hidden_act` names, or `None`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "gelu" => Some(Self::GeluErf),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Self::GeluTanh),
            "relu" => Some(Self::Relu),
            _ => None,
        }
    }

    fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Self::GeluErf => x.gelu_erf(),
            Self::GeluTanh => x.gelu(),
            Self::Relu => x.relu(),
        }
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn code(self) -> i32 {
        match self {
            Self::GeluErf => 0,
            Self::GeluTanh => 1,
            Self::Relu => 2,
        }
    }
}

/// The attention bias on padded positions where the softmax is candle's (`exp` of it is 0 in
/// every precision, and it does not overflow f16 as `f32::MIN` does).
const PAD_BIAS: f32 = -10_000.0;

/// Whether the fused kernels run for `x`.
#[cfg(feature = "cuda")]
fn fused(x: &Tensor) -> bool {
    x.device().is_cuda()
        && matches!(x.dtype(), candle_core::DType::F16 | candle_core::DType::F32)
        && x.elem_count() <= u32::MAX as usize
}

/// The sizes of a batch of sequences split into attention heads.
#[derive(Debug, Clone, Copy)]
pub struct Heads {
    pub batch: usize,
    pub len: usize,
    pub heads: usize,
    pub head_dim: usize,
}

impl Heads {
    fn tokens(self) -> usize {
        self.batch * self.len
    }
    fn hidden(self) -> usize {
        self.heads * self.head_dim
    }
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn ints(self) -> Vec<i32> {
        [self.batch, self.len, self.heads, self.head_dim].iter().map(|&v| v as i32).collect()
    }
}

/// Keeps GPU memory the encoder frees in the device's stream-ordered pool rather than handing it
/// back to the driver at every synchronisation (the pool's default): each forward pass ends in a
/// copy to the host, and without this the next pass maps its largest buffers afresh (measured on
/// an H200: the first GEMM of a batch of 512 took 19 ms instead of 3). The pool then holds the
/// largest batch's working memory, as PyTorch's caching allocator does. A no-op off CUDA.
pub fn keep_freed_memory(device: &candle_core::Device) {
    #[cfg(feature = "cuda")]
    cuda::keep_freed_memory(device);
    #[cfg(not(feature = "cuda"))]
    let _ = device;
}

/// Q, K and V in head-major order `(3, batch, heads, len, head_dim)` from the Q/K/V GEMM's
/// output `(batch·len, 3·hidden)` and its bias.
pub fn qkv_heads(qkv: &Tensor, bias: &Tensor, h: Heads) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if fused(qkv) {
        let shape = (3, h.batch, h.heads, h.len, h.head_dim);
        let total = 3 * h.tokens() * h.hidden();
        return cuda::Kernel::new("qkv_heads", vec![bias.clone()], shape, h.ints(), cuda::Grid::Elements(total))
            .run(qkv);
    }
    qkv.broadcast_add(bias)?.reshape((h.batch, h.len, 3, h.heads, h.head_dim))?.permute((2, 0, 3, 1, 4))?.contiguous()
}

/// The attention context `(batch, heads, len, head_dim)` back in token order
/// `(batch·len, hidden)`.
pub fn heads_to_tokens(ctx: &Tensor, h: Heads) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if fused(ctx) {
        let total = h.tokens() * h.hidden();
        return cuda::Kernel::new(
            "heads_to_tokens",
            vec![],
            (h.tokens(), h.hidden()),
            h.ints(),
            cuda::Grid::Elements(total),
        )
        .run(ctx);
    }
    ctx.transpose(1, 2)?.contiguous()?.reshape((h.tokens(), h.hidden()))
}

/// Softmax over the last dimension of the scores `(batch, heads, len, len)`, where sequence `i`
/// has `lens[i]` real tokens: padded keys get probability 0.
pub fn masked_softmax(scores: &Tensor, lens: &[usize], h: Heads) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if fused(scores) && h.len <= 512 {
        let lens: Vec<f32> = lens.iter().map(|&l| l as f32).collect();
        let lens = Tensor::from_vec(lens, h.batch, scores.device())?.to_dtype(scores.dtype())?;
        let rows = h.batch * h.heads * h.len;
        let ints = vec![rows as i32, h.len as i32, (h.heads * h.len) as i32];
        return cuda::Kernel::new("masked_softmax", vec![lens], scores.shape().clone(), ints, cuda::Grid::Warps(rows))
            .run(scores);
    }
    if lens.iter().all(|&l| l == h.len) {
        return candle_nn::ops::softmax_last_dim(scores);
    }
    let bias: Vec<f32> =
        lens.iter().flat_map(|&l| (0..h.len).map(move |j| if j < l { 0.0 } else { PAD_BIAS })).collect();
    let bias = Tensor::from_vec(bias, (h.batch, 1, 1, h.len), scores.device())?.to_dtype(scores.dtype())?;
    candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&bias)?)
}

/// `LayerNorm(a + bias + res) · gamma + beta` over rows of `a` `(rows, cols)`; row `r` takes
/// `res`'s row `r % res.dim(0)` (a residual has `rows` rows; position embeddings have `len`).
pub fn bias_residual_norm(
    a: &Tensor,
    bias: &Tensor,
    res: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    eps: f32,
) -> Result<Tensor> {
    let (rows, cols) = a.dims2()?;
    let res_rows = res.dim(0)?;
    #[cfg(feature = "cuda")]
    if fused(a) {
        let operands = vec![bias.clone(), res.clone(), gamma.clone(), beta.clone()];
        let grid = cuda::Grid::Rows { rows, shared_bytes: ((cols + 32) * 4) as u32 };
        return cuda::Kernel::new(
            "bias_residual_norm",
            operands,
            (rows, cols),
            vec![cols as i32, res_rows as i32],
            grid,
        )
        .with_float(eps)
        .run(a);
    }
    let sum = if res_rows == rows {
        (a.broadcast_add(bias)? + res)?
    } else {
        a.reshape((rows / res_rows, res_rows, cols))?.broadcast_add(res)?.reshape((rows, cols))?.broadcast_add(bias)?
    };
    candle_nn::ops::layer_norm(&sum, gamma, beta, eps)
}

/// `act(a + bias)` over rows of `a` `(rows, cols)`.
pub fn bias_act(a: &Tensor, bias: &Tensor, act: Activation) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if fused(a) {
        let (rows, cols) = a.dims2()?;
        let ints = vec![rows as i32, cols as i32, act.code()];
        return cuda::Kernel::new(
            "bias_act",
            vec![bias.clone()],
            (rows, cols),
            ints,
            cuda::Grid::Elements(rows * cols),
        )
        .run(a);
    }
    act.apply(&a.broadcast_add(bias)?)
}

#[cfg(feature = "cuda")]
mod cuda {
    //! Launching a kernel of `encoder_kernels.cu` as a candle custom operation on its first
    //! operand (the others are read from the tensors the operation holds).

    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDType, WrapErr};
    use candle_core::{CpuStorage, CudaStorage, CustomOp1, DType, Layout, Result, Shape, Storage, Tensor};

    pub(super) fn keep_freed_memory(device: &candle_core::Device) {
        use candle_core::cuda_backend::cudarc::driver::sys;
        let Ok(cuda) = device.as_cuda_device() else { return };
        let ordinal = cuda.cuda_stream().context().cu_device();
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let mut threshold = u64::MAX;
        // SAFETY: plain driver calls on a valid device; `threshold` outlives the call.
        unsafe {
            if sys::cuDeviceGetDefaultMemPool(&mut pool, ordinal) == sys::CUresult::CUDA_SUCCESS {
                let attr = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
                let _ = sys::cuMemPoolSetAttribute(pool, attr, (&mut threshold as *mut u64).cast());
            }
        }
    }

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/encoder_kernels.ptx"));

    /// How the work is spread: a thread per element (grid-stride), a warp per row, or a block of
    /// 128 threads per row with dynamic shared memory.
    pub(super) enum Grid {
        Elements(usize),
        Warps(usize),
        Rows { rows: usize, shared_bytes: u32 },
    }

    impl Grid {
        fn config(&self) -> LaunchConfig {
            let blocks = |n: usize, per: usize| n.div_ceil(per).clamp(1, 65_535) as u32;
            let (grid, block, shared) = match *self {
                Self::Elements(n) => (blocks(n, 256).min(132 * 16), 256, 0),
                Self::Warps(rows) => (rows.div_ceil(8) as u32, 256, 0),
                Self::Rows { rows, shared_bytes } => (rows as u32, 128, shared_bytes),
            };
            LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: shared }
        }
    }

    /// One launch: `name_<dtype>(input, operands…, out, ints…, [float])`.
    pub(super) struct Kernel {
        name: &'static str,
        operands: Vec<Tensor>,
        out: Shape,
        ints: Vec<i32>,
        float: Option<f32>,
        grid: Grid,
    }

    impl Kernel {
        pub(super) fn new(
            name: &'static str,
            operands: Vec<Tensor>,
            out: impl Into<Shape>,
            ints: Vec<i32>,
            grid: Grid,
        ) -> Self {
            Self { name, operands, out: out.into(), ints, float: None, grid }
        }

        pub(super) fn with_float(mut self, value: f32) -> Self {
            self.float = Some(value);
            self
        }

        pub(super) fn run(self, input: &Tensor) -> Result<Tensor> {
            input.apply_op1_no_bwd(&self)
        }

        fn launch<T: CudaDType + DeviceRepr>(
            &self,
            storage: &CudaStorage,
            layout: &Layout,
            suffix: &str,
        ) -> Result<(CudaStorage, Shape)> {
            let device = storage.device().clone();
            let input = view(self.name, storage.as_cuda_slice::<T>()?, layout)?;
            let guards: Vec<_> = self.operands.iter().map(|t| t.storage_and_layout()).collect();
            let mut operands = Vec::with_capacity(guards.len());
            for (guard, layout) in &guards {
                match &**guard {
                    Storage::Cuda(s) => operands.push(view(self.name, s.as_cuda_slice::<T>()?, layout)?),
                    _ => candle_core::bail!("{}: an operand is not on the GPU", self.name),
                }
            }
            // SAFETY: every element is written by the kernel before it is read.
            let out = unsafe { device.alloc::<T>(self.out.elem_count())? };
            let func = device.get_or_load_custom_func(&format!("{}_{suffix}", self.name), "ctxd_encoder", PTX)?;
            let mut args = func.builder();
            args.arg(&input);
            for operand in &operands {
                args.arg(operand);
            }
            args.arg(&out);
            for value in &self.ints {
                args.arg(value);
            }
            if let Some(value) = &self.float {
                args.arg(value);
            }
            // SAFETY: the arguments match the kernel's signature in encoder_kernels.cu.
            unsafe { args.launch(self.grid.config()) }.w()?;
            Ok((CudaStorage::wrap_cuda_slice(out, device), self.out.clone()))
        }
    }

    /// The elements of a contiguous operand.
    fn view<'a, T>(kernel: &str, slice: &'a CudaSlice<T>, layout: &Layout) -> Result<CudaView<'a, T>> {
        match layout.contiguous_offsets() {
            Some((start, end)) => Ok(slice.slice(start..end)),
            None => candle_core::bail!("{kernel}: an operand is not contiguous"),
        }
    }

    impl CustomOp1 for Kernel {
        fn name(&self) -> &'static str {
            self.name
        }

        fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
            candle_core::bail!("{} is a CUDA kernel: the CPU composes candle's operations", self.name)
        }

        fn cuda_fwd(&self, storage: &CudaStorage, layout: &Layout) -> Result<(CudaStorage, Shape)> {
            match storage.dtype() {
                DType::F16 => self.launch::<half::f16>(storage, layout, "f16"),
                DType::F32 => self.launch::<f32>(storage, layout, "f32"),
                other => candle_core::bail!("{}: no kernel for {other:?}", self.name),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;

    fn h() -> Heads {
        Heads { batch: 2, len: 3, heads: 2, head_dim: 2 }
    }

    #[test]
    fn padded_keys_get_no_probability_and_rows_sum_to_one() {
        let scores = Tensor::arange(0f32, 36.0, &Device::Cpu).unwrap().reshape((2, 2, 3, 3)).unwrap();
        let probs = masked_softmax(&scores, &[3, 1], h()).unwrap();
        assert_eq!(probs.dims(), &[2, 2, 3, 3]);
        let all = probs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (r, row) in all.chunks(3).enumerate() {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "row {r}: {row:?}");
            if r >= 6 {
                // The second sequence has one real token: its keys 2 and 3 are padding.
                assert_eq!((row[0], row[1], row[2]), (1.0, 0.0, 0.0), "row {r}");
            }
        }
    }

    #[test]
    fn qkv_heads_and_back_keep_each_value_in_its_head() {
        let h = h();
        let (n, hidden) = (h.batch * h.len, h.heads * h.head_dim);
        let qkv =
            Tensor::arange(0f32, (n * 3 * hidden) as f32, &Device::Cpu).unwrap().reshape((n, 3 * hidden)).unwrap();
        let bias = Tensor::zeros(3 * hidden, candle_core::DType::F32, &Device::Cpu).unwrap();
        let heads = qkv_heads(&qkv, &bias, h).unwrap();
        assert_eq!(heads.dims(), &[3, 2, 2, 3, 2]);
        // K (1) of sequence 1, head 1, token 2, element 0 is row 1·3+2 = 5, column hidden + 1·2 + 0.
        let v = heads.get(1).unwrap().get(1).unwrap().get(1).unwrap().get(2).unwrap().get(0).unwrap();
        assert_eq!(v.to_scalar::<f32>().unwrap(), (5 * 3 * hidden + hidden + 2) as f32);
        // Q back in token order is Q's columns of the input.
        let back = heads_to_tokens(&heads.get(0).unwrap(), h).unwrap();
        assert_eq!(back.to_vec2::<f32>().unwrap(), qkv.narrow(1, 0, hidden).unwrap().to_vec2::<f32>().unwrap());
    }

    #[test]
    fn bias_residual_norm_takes_position_rows_by_token() {
        let a = Tensor::zeros((4, 2), candle_core::DType::F32, &Device::Cpu).unwrap();
        let bias = Tensor::new(&[0f32, 0.0], &Device::Cpu).unwrap();
        // Two sequences of two tokens: position rows [1, -1] and [-2, 2].
        let positions = Tensor::new(&[[1f32, -1.0], [-2.0, 2.0]], &Device::Cpu).unwrap();
        let gamma = Tensor::new(&[1f32, 1.0], &Device::Cpu).unwrap();
        let out = bias_residual_norm(&a, &bias, &positions, &gamma, &bias, 1e-12).unwrap().to_vec2::<f32>().unwrap();
        for (r, row) in out.iter().enumerate() {
            let want = if r % 2 == 0 { [1.0, -1.0] } else { [-1.0, 1.0] };
            assert!((row[0] - want[0]).abs() < 1e-4 && (row[1] - want[1]).abs() < 1e-4, "row {r}: {row:?}");
        }
    }
}
