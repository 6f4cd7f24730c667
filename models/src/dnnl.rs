//! A small, safe binding to oneDNN's C API (matmul and reorder only), loaded at run time.
//!
//! ctxd does not link oneDNN: the library is opened with `dlopen` when the fast CPU embedder
//! starts, so the build needs nothing and a machine without oneDNN still runs (on candle's
//! kernels). Search order for the shared library:
//!
//! 1. `$CTXD_DNNL_LIB` (a path to `libdnnl.so.3`);
//! 2. ctxd's library cache, `$CTXD_LIB_DIR/libdnnl.so.3` (default `~/.cache/ctxd/lib`) — where
//!    `scripts/fetch-onednn.sh` unpacks the `onednn-cpu-gomp` wheel from PyPI;
//! 3. the dynamic loader's own search (`libdnnl.so.3`, e.g. a system package).
//!
//! Only oneDNN 3.x is accepted (the C API changed at 3.0). The binding exposes what the
//! embedder needs: memory descriptors, matmul primitives with bias and post-ops (sum, GELU),
//! reorders (weights into the layout the kernel wants, f32 → bf16), and the CPU ISA oneDNN
//! detected, which decides whether bf16 runs natively ([`crate::cpu`] names it and decides
//! whether `auto` runs bf16).
//!
//! Threading: the library is the GNU OpenMP build. Every thread that executes primitives calls
//! [`Dnnl::single_threaded`] first, so each ctxd worker thread runs its kernels on itself and the
//! number of busy cores equals the number of workers (no OpenMP pool on top of ctxd's threads).

use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::Arc;

use crate::ModelError;

type Status = i32;
type Handle = *mut c_void;

const DNNL_CPU: i32 = 1;
const STREAM_DEFAULT: u32 = 1;
const FORMAT_ANY: i32 = 1;
const QUERY_WEIGHTS_MD: i32 = 131;
/// `dnnl_query_impl_info_str`: the implementation's name (`brg:avx512_core_amx`, …).
const QUERY_IMPL_INFO_STR: i32 = 8;
/// `DNNL_ARG_SRC`.
pub const ARG_SRC: i32 = 1;
/// `DNNL_ARG_DST`.
pub const ARG_DST: i32 = 17;
/// `DNNL_ARG_WEIGHTS`.
pub const ARG_WEIGHTS: i32 = 33;
/// `DNNL_ARG_BIAS`.
pub const ARG_BIAS: i32 = 41;
const ALG_GELU_ERF: i32 = 0x31;
pub(crate) const ISA_AVX512_CORE_BF16: u32 = 0xe7;
pub(crate) const ISA_AVX2_VNNI_2: u32 = 0x1f;

/// Element types ctxd uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Bf16,
    F32,
}

impl DataType {
    fn raw(self) -> i32 {
        match self {
            DataType::Bf16 => 2,
            DataType::F32 => 3,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::Bf16 => 2,
            DataType::F32 => 4,
        }
    }
}

#[repr(C)]
struct ExecArg {
    arg: i32,
    memory: Handle,
}

#[repr(C)]
struct Version {
    major: i32,
    minor: i32,
    patch: i32,
}

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        #[allow(non_snake_case)]
        struct Api {
            $($name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            omp_set_num_threads: Option<unsafe extern "C" fn(i32)>,
        }
        impl Api {
            fn load(lib: &libloading::Library, path: &str) -> Result<Self, ModelError> {
                // SAFETY: each symbol is looked up by its C name and given the signature of
                // oneDNN 3.x's public header (checked against `dnnl.h` of 3.2).
                unsafe {
                    Ok(Self {
                        $($name: *lib.get(concat!(stringify!($name), "\0").as_bytes()).map_err(|e| {
                            ModelError::Backend(format!("{path}: missing symbol {}: {e}", stringify!($name)))
                        })?,)*
                        omp_set_num_threads: lib.get(b"omp_set_num_threads\0").ok().map(|s| *s),
                    })
                }
            }
        }
    };
}

api! {
    dnnl_version: fn() -> *const Version;
    dnnl_get_effective_cpu_isa: fn() -> u32;
    dnnl_engine_create: fn(*mut Handle, i32, usize) -> Status;
    dnnl_engine_destroy: fn(Handle) -> Status;
    dnnl_stream_create: fn(*mut Handle, Handle, u32) -> Status;
    dnnl_stream_destroy: fn(Handle) -> Status;
    dnnl_stream_wait: fn(Handle) -> Status;
    dnnl_memory_desc_create_with_strides: fn(*mut Handle, i32, *const i64, i32, *const i64) -> Status;
    dnnl_memory_desc_create_with_tag: fn(*mut Handle, i32, *const i64, i32, i32) -> Status;
    dnnl_memory_desc_clone: fn(*mut Handle, Handle) -> Status;
    dnnl_memory_desc_destroy: fn(Handle) -> Status;
    dnnl_memory_desc_equal: fn(Handle, Handle) -> i32;
    dnnl_memory_desc_get_size: fn(Handle) -> usize;
    dnnl_memory_create: fn(*mut Handle, Handle, Handle, *mut c_void) -> Status;
    dnnl_memory_destroy: fn(Handle) -> Status;
    dnnl_primitive_attr_create: fn(*mut Handle) -> Status;
    dnnl_primitive_attr_destroy: fn(Handle) -> Status;
    dnnl_primitive_attr_set_post_ops: fn(Handle, Handle) -> Status;
    dnnl_post_ops_create: fn(*mut Handle) -> Status;
    dnnl_post_ops_destroy: fn(Handle) -> Status;
    dnnl_post_ops_append_sum: fn(Handle, f32, i32, i32) -> Status;
    dnnl_post_ops_append_eltwise: fn(Handle, i32, f32, f32) -> Status;
    dnnl_matmul_primitive_desc_create: fn(*mut Handle, Handle, Handle, Handle, Handle, Handle, Handle) -> Status;
    dnnl_reorder_primitive_desc_create: fn(*mut Handle, Handle, Handle, Handle, Handle, Handle) -> Status;
    dnnl_primitive_desc_query_md: fn(Handle, i32, i32) -> Handle;
    dnnl_primitive_desc_query: fn(Handle, i32, i32, *mut c_void) -> Status;
    dnnl_primitive_desc_destroy: fn(Handle) -> Status;
    dnnl_primitive_create: fn(*mut Handle, Handle) -> Status;
    dnnl_primitive_destroy: fn(Handle) -> Status;
    dnnl_primitive_execute: fn(Handle, Handle, i32, *const ExecArg) -> Status;
}

/// The loaded library. Cheap to clone (shared).
#[derive(Clone)]
pub struct Dnnl {
    api: Arc<Api>,
    /// Where the library was loaded from.
    pub path: String,
    /// `major.minor.patch`.
    pub version: String,
    pub(crate) isa: u32,
    _lib: Arc<libloading::Library>,
}

// SAFETY: the function table is plain function pointers into a library that stays loaded
// (`_lib`) for as long as any clone lives; oneDNN's C API is thread-safe for what ctxd calls.
unsafe impl Send for Dnnl {}
unsafe impl Sync for Dnnl {}

/// Candidate paths for `libdnnl.so.3`, in search order.
pub fn library_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("CTXD_DNNL_LIB") {
        out.push(PathBuf::from(p));
    }
    if let Some(dir) = std::env::var_os("CTXD_LIB_DIR") {
        out.push(PathBuf::from(dir).join("libdnnl.so.3"));
    } else if let Some(cache) = dirs::cache_dir() {
        out.push(cache.join("ctxd").join("lib").join("libdnnl.so.3"));
    }
    out.push(PathBuf::from("libdnnl.so.3"));
    out
}

fn check(status: Status, what: &str) -> Result<(), ModelError> {
    if status == 0 {
        Ok(())
    } else {
        Err(ModelError::Backend(format!("onednn {what} failed with status {status}")))
    }
}

impl Dnnl {
    /// Opens oneDNN from the first candidate that loads and is version 3.
    pub fn load() -> Result<Self, ModelError> {
        let mut errors = Vec::new();
        for path in library_candidates() {
            let shown = path.display().to_string();
            if path.components().count() > 1 && !path.exists() {
                errors.push(format!("{shown}: not found"));
                continue;
            }
            // SAFETY: loading runs the library's initialisers; oneDNN's are benign.
            let lib = match unsafe { libloading::Library::new(&path) } {
                Ok(lib) => lib,
                Err(e) => {
                    errors.push(format!("{shown}: {e}"));
                    continue;
                }
            };
            let api = Api::load(&lib, &shown)?;
            // SAFETY: dnnl_version returns a pointer to a static struct.
            let v = unsafe { &*(api.dnnl_version)() };
            if v.major != 3 {
                errors.push(format!("{shown}: version {}.{} (need 3.x)", v.major, v.minor));
                continue;
            }
            let version = format!("{}.{}.{}", v.major, v.minor, v.patch);
            // SAFETY: no arguments; reads the detected ISA.
            let isa = unsafe { (api.dnnl_get_effective_cpu_isa)() };
            return Ok(Self { api: Arc::new(api), path: shown, version, isa, _lib: Arc::new(lib) });
        }
        Err(ModelError::Backend(format!("onednn not found ({})", errors.join("; "))))
    }

    /// Whether the CPU runs bf16 matmuls natively (AVX512-BF16, AMX or AVX2-VNNI-2).
    pub fn native_bf16(&self) -> bool {
        self.isa & ISA_AVX512_CORE_BF16 == ISA_AVX512_CORE_BF16 || self.isa & ISA_AVX2_VNNI_2 == ISA_AVX2_VNNI_2
    }

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

    /// Makes the calling thread run oneDNN kernels on itself only.
    pub fn single_threaded(&self) {
        if let Some(f) = self.api.omp_set_num_threads {
            // SAFETY: sets the calling thread's OpenMP thread-count ICV.
            unsafe { f(1) }
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

    /// A plain (strided) memory descriptor.
    pub fn md(&self, dims: &[i64], strides: &[i64], dt: DataType) -> Result<Md, ModelError> {
        let mut md = std::ptr::null_mut();
        // SAFETY: dims/strides have `dims.len()` elements each.
        check(
            unsafe {
                (self.api.dnnl_memory_desc_create_with_strides)(
                    &mut md,
                    dims.len() as i32,
                    dims.as_ptr(),
                    dt.raw(),
                    strides.as_ptr(),
                )
            },
            "memory desc",
        )?;
        Ok(Md { dnnl: self.clone(), raw: md })
    }

    /// A row-major dense descriptor.
    pub fn dense(&self, dims: &[i64], dt: DataType) -> Result<Md, ModelError> {
        let mut strides = vec![1i64; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        self.md(dims, &strides, dt)
    }

    /// A descriptor with layout left to the primitive (`format_tag::any`).
    pub fn any(&self, dims: &[i64], dt: DataType) -> Result<Md, ModelError> {
        let mut md = std::ptr::null_mut();
        // SAFETY: dims has `dims.len()` elements.
        check(
            unsafe {
                (self.api.dnnl_memory_desc_create_with_tag)(
                    &mut md,
                    dims.len() as i32,
                    dims.as_ptr(),
                    dt.raw(),
                    FORMAT_ANY,
                )
            },
            "memory desc",
        )?;
        Ok(Md { dnnl: self.clone(), raw: md })
    }
}

/// An owned memory descriptor.
pub struct Md {
    dnnl: Dnnl,
    raw: Handle,
}

// SAFETY: a memory descriptor is an immutable value once created.
unsafe impl Send for Md {}
unsafe impl Sync for Md {}

impl Md {
    /// Bytes a buffer with this layout needs.
    pub fn size(&self) -> usize {
        // SAFETY: valid descriptor.
        unsafe { (self.dnnl.api.dnnl_memory_desc_get_size)(self.raw) }
    }

    fn same(&self, other: &Md) -> bool {
        // SAFETY: both valid descriptors.
        unsafe { (self.dnnl.api.dnnl_memory_desc_equal)(self.raw, other.raw) != 0 }
    }
}

impl Drop for Md {
    fn drop(&mut self) {
        // SAFETY: owned descriptor, destroyed once.
        unsafe { (self.dnnl.api.dnnl_memory_desc_destroy)(self.raw) };
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
        let chosen = unsafe {
            let q = (api.dnnl_primitive_desc_query_md)(pd, QUERY_WEIGHTS_MD, 0);
            let mut owned = std::ptr::null_mut();
            check((api.dnnl_memory_desc_clone)(&mut owned, q), "memory desc clone")?;
            Md { dnnl: self.dnnl.clone(), raw: owned }
        };
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
        // SAFETY: valid descriptors and engine.
        check(
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
        let mut cloned = std::ptr::null_mut();
        // SAFETY: want is valid; the clone is owned by the new Md.
        check(unsafe { (engine.dnnl.api.dnnl_memory_desc_clone)(&mut cloned, want.raw) }, "memory desc clone")?;
        let md = Md { dnnl: engine.dnnl.clone(), raw: cloned };
        let buf = engine.reorder(&self.source, &self.source_md, &md)?;
        self.layouts.push((md, buf));
        Ok(self.layouts.last().expect("just pushed").1.as_ptr().cast())
    }
}
