//! Whether a GPU can run the model: the one probe behind `device = "auto"` and `cuda:N`.
//!
//! A CUDA build of ctxd links no CUDA library at load (`scripts/cuda-patch-candle.sh`: candle's
//! cudarc opens the driver and the CUDA libraries with `dlopen` when they are first used, and the
//! CUDA runtime is linked statically), so one binary starts on machines with and without the
//! NVIDIA driver. cudarc panics when a library it needs cannot be opened, so nothing touches
//! candle's CUDA backend before this probe has said yes. It asks, in order, and the first failure
//! is the answer, in words a user can act on:
//!
//! 1. the binary was built with the `cuda` feature ([`CUDA_BUILT`]);
//! 2. the NVIDIA driver's `libcuda.so.1` opens;
//! 3. `cuInit` succeeds and `cuDeviceGetCount` counts device N;
//! 4. the libraries candle opens when it creates a device — cuBLAS, cuBLASLt, cuRAND — open under
//!    one of the names cudarc tries (`LD_LIBRARY_PATH` must reach them: a CUDA 13 toolkit's
//!    `lib64`, or PyTorch's `site-packages/nvidia/cu13/lib`).
//!
//! Steps 2–4 run in every build, so the probe is tested on machines without a GPU as well: there
//! the answer is step 1's (a CPU build) or step 2's (a CUDA build), which the start-up line then
//! carries (`embedding on cpu with …: device auto: no NVIDIA driver: …`).

use std::ffi::c_int;
use std::sync::OnceLock;

use libloading::Library;

/// Whether this binary was built with candle's CUDA backend.
pub const CUDA_BUILT: bool = cfg!(feature = "cuda");

/// What a working driver said: its CUDA version and how many devices it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Driver {
    /// `cuDriverGetVersion`: 13000 for CUDA 13.0.
    pub cuda_version: i32,
    /// `cuDeviceGetCount`.
    pub devices: usize,
}

impl Driver {
    /// `CUDA 13.0, 1 GPU`.
    pub fn describe(&self) -> String {
        let (major, minor) = (self.cuda_version / 1000, (self.cuda_version % 1000) / 10);
        let plural = if self.devices == 1 { "" } else { "s" };
        format!("driver for CUDA {major}.{minor}, {} GPU{plural}", self.devices)
    }
}

/// The driver's library names, most specific first.
const DRIVER_LIBS: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

/// The libraries candle opens when it creates a CUDA device (its cuBLAS handle and cuRAND
/// generator), each with the names cudarc tries for it.
const DEVICE_LIBS: [(&str, &[&str]); 3] = [
    ("cuBLAS", &["libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"]),
    ("cuBLASLt", &["libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"]),
    ("cuRAND", &["libcurand.so", "libcurand.so.13", "libcurand.so.12", "libcurand.so.10"]),
];

/// Why GPU `n` cannot run the model, or the driver's facts where it can (steps 1–4 above).
pub fn probe(n: usize) -> Result<Driver, String> {
    if !CUDA_BUILT {
        return Err("this binary has no cuda support (scripts/build-cuda.sh builds one)".into());
    }
    probe_libraries(n)
}

/// Steps 2–4, whatever the build.
pub fn probe_libraries(n: usize) -> Result<Driver, String> {
    let driver = driver()?;
    if n >= driver.devices {
        return Err(format!("the NVIDIA driver counts {} GPUs, so there is no cuda:{n}", driver.devices));
    }
    for (what, names) in DEVICE_LIBS {
        open_any(names).map_err(|e| {
            format!(
                "{what} cannot be opened ({e}): point LD_LIBRARY_PATH at the CUDA 13 libraries (a toolkit's \
                 lib64, or PyTorch's site-packages/nvidia/cu13/lib)"
            )
        })?;
    }
    Ok(driver)
}

/// Opens the first of `names` that opens; the first name's error otherwise.
fn open_any(names: &[&str]) -> Result<&'static Library, String> {
    let mut first = None;
    for name in names {
        // SAFETY: the CUDA libraries' initialisers have no preconditions; the handle is kept for
        // the life of the process (cudarc opens its own later, which shares it).
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok(Box::leak(Box::new(lib))),
            Err(e) => {
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Err(first.unwrap_or_default())
}

/// Steps 2 and 3, asked once per process.
fn driver() -> Result<Driver, String> {
    static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();
    DRIVER.get_or_init(ask_driver).clone()
}

fn ask_driver() -> Result<Driver, String> {
    let lib = open_any(&DRIVER_LIBS).map_err(|e| format!("no NVIDIA driver ({e})"))?;
    type Init = unsafe extern "C" fn(u32) -> c_int;
    type GetInt = unsafe extern "C" fn(*mut c_int) -> c_int;
    // SAFETY: the signatures are the driver API's (cuda.h): CUresult cuInit(unsigned int),
    // CUresult cuDriverGetVersion(int*), CUresult cuDeviceGetCount(int*).
    unsafe {
        let symbol = |name: &[u8]| -> Result<GetInt, String> {
            lib.get::<GetInt>(name).map(|s| *s).map_err(|e| format!("the NVIDIA driver lacks a symbol: {e}"))
        };
        let init = lib.get::<Init>(b"cuInit\0").map_err(|e| format!("the NVIDIA driver lacks cuInit: {e}"))?;
        let rc = init(0);
        if rc != 0 {
            return Err(format!("the NVIDIA driver did not start: cuInit returned {rc} ({})", result_name(rc)));
        }
        let mut version: c_int = 0;
        let rc = symbol(b"cuDriverGetVersion\0")?(&mut version);
        if rc != 0 {
            return Err(format!("cuDriverGetVersion returned {rc} ({})", result_name(rc)));
        }
        let mut count: c_int = 0;
        let rc = symbol(b"cuDeviceGetCount\0")?(&mut count);
        if rc != 0 {
            return Err(format!("cuDeviceGetCount returned {rc} ({})", result_name(rc)));
        }
        Ok(Driver { cuda_version: version, devices: usize::try_from(count).unwrap_or(0) })
    }
}

/// The driver's result codes a user meets at start-up (cuda.h's CUresult), in words.
fn result_name(rc: c_int) -> &'static str {
    match rc {
        3 => "not initialized",
        35 => "the driver is older than the CUDA runtime: CUDA 13 needs driver 580 or newer",
        46 => "the devices are busy or unavailable (exclusive compute mode?)",
        100 => "no CUDA-capable device is detected",
        101 => "invalid device ordinal",
        304 => "the operating system refused the call (container without the GPU passed through?)",
        999 => "unknown error",
        _ => "see cuda.h's CUresult",
    }
}

#[cfg(test)]
mod tests {
    use super::{probe, probe_libraries, result_name, Driver, CUDA_BUILT};

    #[test]
    fn the_probe_says_why_in_words() {
        match probe_libraries(0) {
            Ok(d) => assert!(d.devices >= 1, "{d:?}"),
            Err(why) => assert!(
                why.starts_with("no NVIDIA driver (")
                    || why.contains("cuInit")
                    || why.contains("counts 0 GPUs")
                    || why.contains("LD_LIBRARY_PATH"),
                "{why}"
            ),
        }
        if !CUDA_BUILT {
            assert!(probe(0).unwrap_err().contains("no cuda support"));
        }
        // A device past the last one is refused by the count, never handed to candle.
        if let Ok(d) = probe_libraries(0) {
            assert!(probe_libraries(d.devices).unwrap_err().contains("there is no cuda:"));
        }
    }

    #[test]
    fn driver_facts_read_as_words() {
        assert_eq!(Driver { cuda_version: 13000, devices: 1 }.describe(), "driver for CUDA 13.0, 1 GPU");
        assert_eq!(Driver { cuda_version: 12080, devices: 8 }.describe(), "driver for CUDA 12.8, 8 GPUs");
        assert!(result_name(35).contains("580"));
        assert_eq!(result_name(7), "see cuda.h's CUresult");
    }
}
