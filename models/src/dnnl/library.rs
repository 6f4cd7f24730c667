//! Loading oneDNN's shared library (`dlopen`, version check, symbols), its status codes as
//! errors, memory descriptors and the CPU ISA it detected (see the module docs of `dnnl`).

use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::ModelError;

pub(super) type Status = i32;
pub(super) type Handle = *mut c_void;

pub(super) const FORMAT_ANY: i32 = 1;
/// `DNNL_ARG_SRC`.
pub const ARG_SRC: i32 = 1;
/// `DNNL_ARG_DST`.
pub const ARG_DST: i32 = 17;
/// `DNNL_ARG_WEIGHTS`.
pub const ARG_WEIGHTS: i32 = 33;
/// `DNNL_ARG_BIAS`.
pub const ARG_BIAS: i32 = 41;
pub(crate) const ISA_AVX512_CORE_BF16: u32 = 0xe7;
pub(crate) const ISA_AVX2_VNNI_2: u32 = 0x1f;

/// Element types ctxd uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Bf16,
    F32,
}

impl DataType {
    pub(super) fn raw(self) -> i32 {
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
pub(super) struct ExecArg {
    pub(super) arg: i32,
    pub(super) memory: Handle,
}

#[repr(C)]
pub(super) struct Version {
    major: i32,
    minor: i32,
    patch: i32,
}

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        #[allow(non_snake_case)]
        pub(super) struct Api {
            $(pub(super) $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            pub(super) omp_set_num_threads: Option<unsafe extern "C" fn(i32)>,
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
    pub(super) api: Arc<Api>,
    /// Where the library was loaded from.
    pub path: String,
    /// `major.minor.patch`.
    pub version: String,
    pub(crate) isa: u32,
    _lib: Arc<libloading::Library>,
    /// The OpenMP runtime shipped beside it in a package (loaded first, see [`Dnnl::load`]).
    _omp: Option<Arc<libloading::Library>>,
}

// SAFETY: the function table is plain function pointers into a library that stays loaded
// (`_lib`) for as long as any clone lives; oneDNN's C API is thread-safe for what ctxd calls.
unsafe impl Send for Dnnl {}
// SAFETY: as for `Send`: shared references only call the thread-safe C API through the table.
unsafe impl Sync for Dnnl {}

/// Candidate paths for `libdnnl.so.3`, in search order (the module docs list it).
pub fn library_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("CTXD_DNNL_LIB") {
        out.push(PathBuf::from(p));
    }
    // An unpacked package: `<prefix>/bin/ctxd` beside `<prefix>/lib/libdnnl.so.3`.
    if let Some(prefix) = crate::resolve::install_prefix() {
        out.push(prefix.join("lib").join("libdnnl.so.3"));
    }
    if let Some(dir) = std::env::var_os("CTXD_LIB_DIR") {
        out.push(PathBuf::from(dir).join("libdnnl.so.3"));
    } else if let Some(cache) = dirs::cache_dir() {
        out.push(cache.join("ctxd").join("lib").join("libdnnl.so.3"));
    }
    out.push(PathBuf::from("libdnnl.so.3"));
    out
}

pub(super) fn check(status: Status, what: &str) -> Result<(), ModelError> {
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
            // A package ships the OpenMP runtime oneDNN needs (`libgomp.so.1`, which minimal
            // systems lack) beside it: loaded first, it satisfies oneDNN's dependency by its
            // soname, without LD_LIBRARY_PATH.
            let omp = path.parent().map(|dir| dir.join("libgomp.so.1")).filter(|p| p.is_file());
            // SAFETY: loading runs the runtime's initialisers, which only read the environment.
            let omp = omp.and_then(|p| unsafe { libloading::Library::new(p) }.ok()).map(Arc::new);
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
            return Ok(Self { api: Arc::new(api), path: shown, version, isa, _lib: Arc::new(lib), _omp: omp });
        }
        Err(ModelError::Backend(format!("onednn not found ({})", errors.join("; "))))
    }

    /// Whether the CPU runs bf16 matmuls natively (AVX512-BF16, AMX or AVX2-VNNI-2).
    pub fn native_bf16(&self) -> bool {
        self.isa & ISA_AVX512_CORE_BF16 == ISA_AVX512_CORE_BF16 || self.isa & ISA_AVX2_VNNI_2 == ISA_AVX2_VNNI_2
    }

    /// Makes the calling thread run oneDNN kernels on itself only.
    pub fn single_threaded(&self) {
        if let Some(f) = self.api.omp_set_num_threads {
            // SAFETY: sets the calling thread's OpenMP thread-count ICV.
            unsafe { f(1) }
        }
    }

    /// A plain (strided) memory descriptor.
    pub fn md(&self, dims: &[i64], strides: &[i64], dt: DataType) -> Result<Md, ModelError> {
        let mut md = std::ptr::null_mut();
        check(
            // SAFETY: dims/strides have `dims.len()` elements each.
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
        check(
            // SAFETY: dims has `dims.len()` elements.
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

    /// An owned copy of a descriptor that belongs to something else (a primitive descriptor).
    pub(super) fn clone_md(&self, raw: Handle) -> Result<Md, ModelError> {
        let mut owned = std::ptr::null_mut();
        // SAFETY: raw is a valid descriptor; the clone is owned by the new Md.
        check(unsafe { (self.api.dnnl_memory_desc_clone)(&mut owned, raw) }, "memory desc clone")?;
        Ok(Md { dnnl: self.clone(), raw: owned })
    }
}

/// An owned memory descriptor.
pub struct Md {
    pub(super) dnnl: Dnnl,
    pub(super) raw: Handle,
}

// SAFETY: a memory descriptor is an immutable value once created.
unsafe impl Send for Md {}
// SAFETY: as for `Send`: an immutable value is read from any thread.
unsafe impl Sync for Md {}

impl Md {
    /// Bytes a buffer with this layout needs.
    pub fn size(&self) -> usize {
        // SAFETY: valid descriptor.
        unsafe { (self.dnnl.api.dnnl_memory_desc_get_size)(self.raw) }
    }

    pub(super) fn same(&self, other: &Md) -> bool {
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
