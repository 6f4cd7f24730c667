//! oneDNN engines and primitives: a CPU engine with its stream, matmuls with fused post-ops,
//! reorders, executing them on caller-owned buffers, and [`Weights`], a weight matrix kept in
//! the layouts its primitives ask for.

use std::ffi::c_void;
use std::sync::Arc;

use super::library::{check, DataType, Dnnl, ExecArg, Handle, Md, ARG_BIAS, ARG_DST, ARG_SRC, ARG_WEIGHTS};
use crate::error::ModelError;

const DNNL_CPU: i32 = 1;
const STREAM_DEFAULT: u32 = 1;
const QUERY_WEIGHTS_MD: i32 = 131;
/// `dnnl_query_impl_info_str`: the implementation's name (`brg:avx512_core_amx`, …).
const QUERY_IMPL_INFO_STR: i32 = 8;
const ALG_GELU_ERF: i32 = 0x31;

impl Dnnl {
    /// The implementation oneDNN picks for a dense bf16 matmul of the shape the encoder's
    /// dense layers have (`brg:avx512_core_amx`, `brg:avx512_core_bf16`, …).
    pub fn bf16_matmul_impl(&self) -> Result<String, ModelError> {
        let engine = self.engine()?;
        let (src, weights) = (self.dense(&[64, 384], DataType::Bf16)?, self.any(&[384, 1152], DataType::Bf16)?);
        let dst = self.dense(&[64, 1152], DataType::F32)?;
        let api = &self.api;
        let mut pd = std::ptr::null_mut();
        // SAFETY: the descriptors outlive the call; pd is destroyed below; the queried string
        // belongs to pd and is copied before that.
        unsafe {
            let status = (api.dnnl_matmul_primitive_desc_create)(
                &mut pd,
                engine.engine,
                src.raw,
                weights.raw,
                std::ptr::null_mut(),
                dst.raw,
                std::ptr::null_mut(),
            );
            check(status, "bf16 matmul descriptor")?;
            let mut name: *const std::ffi::c_char = std::ptr::null();
            let status = (api.dnnl_primitive_desc_query)(
                pd,
                QUERY_IMPL_INFO_STR,
                0,
                (&mut name as *mut *const std::ffi::c_char).cast(),
            );
            let out = if status == 0 && !name.is_null() {
                Ok(std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned())
            } else {
                Err(ModelError::Backend("onednn did not name its bf16 matmul implementation".into()))
            };
            (api.dnnl_primitive_desc_destroy)(pd);
            out
        }
    }

    /// A CPU engine with an in-order stream. Not shared between threads.
    pub fn engine(&self) -> Result<Engine, ModelError> {
        let mut engine = std::ptr::null_mut();
        let mut stream = std::ptr::null_mut();
        // SAFETY: out-pointers are valid; the engine outlives the stream (dropped in order).
        unsafe {
            check((self.api.dnnl_engine_create)(&mut engine, DNNL_CPU, 0), "engine create")?;
            check((self.api.dnnl_stream_create)(&mut stream, engine, STREAM_DEFAULT), "stream create")?;
        }
        Ok(Engine { dnnl: self.clone(), engine, stream })
    }
}

/// Post-operations fused into a matmul.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PostOp {
    None,
    /// `dst = matmul + dst` (residual add in place).
    Sum,
    /// `dst = gelu_erf(matmul)`.
    Gelu,
}

/// A CPU engine and its stream.
pub struct Engine {
    dnnl: Dnnl,
    engine: Handle,
    stream: Handle,
}

/// A created primitive (matmul or reorder) and the weights layout it wants.
pub struct Primitive {
    dnnl: Dnnl,
    raw: Handle,
    /// For matmuls with `any` weights: the layout the kernel chose.
    pub weights_md: Option<Md>,
    /// The descriptors of the arguments, in the order of `args`.
    mds: Vec<(i32, Md)>,
}

// SAFETY: primitives are immutable after creation; each ctxd worker uses its own.
unsafe impl Send for Primitive {}

impl Drop for Primitive {
    fn drop(&mut self) {
        // SAFETY: owned primitive, destroyed once.
        unsafe { (self.dnnl.api.dnnl_primitive_destroy)(self.raw) };
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: stream before engine, each destroyed once.
        unsafe {
            (self.dnnl.api.dnnl_stream_destroy)(self.stream);
            (self.dnnl.api.dnnl_engine_destroy)(self.engine);
        }
    }
}

// SAFETY: an engine is moved into its worker thread and used only there.
unsafe impl Send for Engine {}

impl Engine {
    /// The library behind this engine.
    pub fn dnnl(&self) -> &Dnnl {
        &self.dnnl
    }

    fn create(&self, pd: Handle, mds: Vec<(i32, Md)>, weights_md: Option<Md>) -> Result<Primitive, ModelError> {
        let api = &self.dnnl.api;
        let mut prim = std::ptr::null_mut();
        // SAFETY: pd is a valid primitive descriptor; destroyed right after creating from it.
        let status = unsafe { (api.dnnl_primitive_create)(&mut prim, pd) };
        // SAFETY: pd is owned here and destroyed once; the primitive keeps its own copy of it.
        unsafe { (api.dnnl_primitive_desc_destroy)(pd) };
        check(status, "primitive create")?;
        Ok(Primitive { dnnl: self.dnnl.clone(), raw: prim, weights_md, mds })
    }

    /// A matmul `dst = src × weights (+ bias) ∘ post`. `weights` may be an `any` descriptor;
    /// the chosen layout is returned in [`Primitive::weights_md`].
    pub fn matmul(
        &self,
        src: Md,
        weights: Md,
        bias: Option<Md>,
        dst: Md,
        post: PostOp,
    ) -> Result<Primitive, ModelError> {
        let api = &self.dnnl.api;
        let mut attr = std::ptr::null_mut();
        let mut po = std::ptr::null_mut();
        let mut pd = std::ptr::null_mut();
        // SAFETY: all handles are created here and destroyed before returning; descriptors
        // outlive the call.
        unsafe {
            check((api.dnnl_primitive_attr_create)(&mut attr), "attr create")?;
            check((api.dnnl_post_ops_create)(&mut po), "post ops create")?;
            let appended = match post {
                PostOp::None => 0,
                PostOp::Sum => (api.dnnl_post_ops_append_sum)(po, 1.0, 0, 0),
                PostOp::Gelu => (api.dnnl_post_ops_append_eltwise)(po, ALG_GELU_ERF, 0.0, 0.0),
            };
            let set = (api.dnnl_primitive_attr_set_post_ops)(attr, po);
            let status = (api.dnnl_matmul_primitive_desc_create)(
                &mut pd,
                self.engine,
                src.raw,
                weights.raw,
                bias.as_ref().map_or(std::ptr::null_mut(), |b| b.raw),
                dst.raw,
                attr,
            );
            (api.dnnl_post_ops_destroy)(po);
            (api.dnnl_primitive_attr_destroy)(attr);
            check(appended, "post op append")?;
            check(set, "post ops set")?;
            check(status, "matmul descriptor")?;
        }
        // SAFETY: the queried descriptor belongs to pd; it is cloned before pd is destroyed.
        let chosen = self.dnnl.clone_md(unsafe { (api.dnnl_primitive_desc_query_md)(pd, QUERY_WEIGHTS_MD, 0) })?;
        let mut mds = vec![(ARG_SRC, src), (ARG_DST, dst)];
        if let Some(b) = bias {
            mds.push((ARG_BIAS, b));
        }
        let weights_md = Some(chosen);
        let prim = self.create(pd, mds, weights_md)?;
        Ok(prim)
    }

    /// Converts `src` (f32, layout `from`) into a new buffer with layout `to`.
    pub fn reorder(&self, src: &[f32], from: &Md, to: &Md) -> Result<Vec<u8>, ModelError> {
        if from.size() != std::mem::size_of_val(src) {
            return Err(ModelError::Backend(format!(
                "reorder source has {} bytes, descriptor wants {}",
                std::mem::size_of_val(src),
                from.size()
            )));
        }
        let api = &self.dnnl.api;
        let mut pd = std::ptr::null_mut();
        check(
            // SAFETY: valid descriptors and engine.
            unsafe {
                (api.dnnl_reorder_primitive_desc_create)(
                    &mut pd,
                    from.raw,
                    self.engine,
                    to.raw,
                    self.engine,
                    std::ptr::null_mut(),
                )
            },
            "reorder descriptor",
        )?;
        let prim = self.create(pd, Vec::new(), None)?;
        let mut out = vec![0u8; to.size()];
        self.run(&prim, &[(ARG_SRC, from, src.as_ptr() as *mut c_void), (ARG_DST, to, out.as_mut_ptr().cast())])?;
        Ok(out)
    }

    /// Executes `prim` with raw buffers and waits for it.
    fn run(&self, prim: &Primitive, args: &[(i32, &Md, *mut c_void)]) -> Result<(), ModelError> {
        let api = &self.dnnl.api;
        let mut mems: Vec<ExecArg> = Vec::with_capacity(args.len());
        let mut result = Ok(());
        for &(arg, md, ptr) in args {
            let mut mem = std::ptr::null_mut();
            // SAFETY: md valid; ptr points to a buffer of at least md.size() bytes (callers).
            let status = unsafe { (api.dnnl_memory_create)(&mut mem, md.raw, self.engine, ptr) };
            if status != 0 {
                result = check(status, "memory create");
                break;
            }
            mems.push(ExecArg { arg, memory: mem });
        }
        if result.is_ok() {
            // SAFETY: all memories created above, same engine as the stream.
            result = check(
                unsafe { (api.dnnl_primitive_execute)(prim.raw, self.stream, mems.len() as i32, mems.as_ptr()) },
                "execute",
            )
            .and_then(|_| check(unsafe { (api.dnnl_stream_wait)(self.stream) }, "stream wait"));
        }
        for m in mems {
            // SAFETY: created above; the buffers are not owned by the memory objects.
            unsafe { (api.dnnl_memory_destroy)(m.memory) };
        }
        result
    }

    /// Executes a matmul created by [`Engine::matmul`]. `bufs` gives a pointer for each of
    /// `ARG_SRC`, `ARG_DST`, `ARG_BIAS` (if it has one) and `ARG_WEIGHTS` (the reordered buffer,
    /// which must match [`Primitive::weights_md`]).
    ///
    /// # Safety
    /// Each pointer must point to a buffer at least as large as its descriptor's size, valid
    /// for reads (and for writes for `ARG_DST`) during the call.
    pub unsafe fn execute(&self, prim: &Primitive, bufs: &[(i32, *const c_void)]) -> Result<(), ModelError> {
        let mut args: Vec<(i32, &Md, *mut c_void)> = Vec::with_capacity(bufs.len());
        for &(arg, ptr) in bufs {
            let md = if arg == ARG_WEIGHTS {
                prim.weights_md.as_ref()
            } else {
                prim.mds.iter().find(|(a, _)| *a == arg).map(|(_, md)| md)
            };
            let md = md.ok_or_else(|| ModelError::Backend(format!("primitive has no argument {arg}")))?;
            args.push((arg, md, ptr as *mut c_void));
        }
        self.run(prim, &args)
    }
}

/// A weight matrix kept in every layout a kernel asked for (usually one).
pub struct Weights {
    /// `[K, N]` f32 source layout (the transpose of a PyTorch `Linear` weight).
    source: Arc<Vec<f32>>,
    source_md: Md,
    layouts: Vec<(Md, Vec<u8>)>,
}

impl Weights {
    /// Wraps a PyTorch `Linear` weight `[out, in]` as a `[in, out]` matmul operand.
    pub fn from_linear(
        dnnl: &Dnnl,
        weight: Arc<Vec<f32>>,
        out_features: usize,
        in_features: usize,
    ) -> Result<Self, ModelError> {
        let (k, n) = (in_features as i64, out_features as i64);
        let source_md = dnnl.md(&[k, n], &[1, k], DataType::F32)?;
        Ok(Self { source: weight, source_md, layouts: Vec::new() })
    }

    /// The buffer in `prim`'s weights layout, reordering (and converting) on first use.
    pub fn for_primitive(&mut self, engine: &Engine, prim: &Primitive) -> Result<*const c_void, ModelError> {
        let want = prim.weights_md.as_ref().ok_or_else(|| ModelError::Backend("primitive has no weights".into()))?;
        if let Some(i) = self.layouts.iter().position(|(md, _)| md.same(want)) {
            return Ok(self.layouts[i].1.as_ptr().cast());
        }
        let md = engine.dnnl().clone_md(want.raw)?;
        let buf = engine.reorder(&self.source, &self.source_md, &md)?;
        self.layouts.push((md, buf));
        Ok(self.layouts.last().expect("just pushed").1.as_ptr().cast())
    }
}
