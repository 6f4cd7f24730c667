//! A small, safe binding to oneDNN's C API (matmul and reorder only), loaded at run time.
//!
//! ctxd does not link oneDNN: the library is opened with `dlopen` when the fast CPU embedder
//! starts, so the build needs nothing and a machine without oneDNN still runs (on candle's
//! kernels). Search order for the shared library:
//!
//! 1. `$CTXD_DNNL_LIB` (a path to `libdnnl.so.3`);
//! 2. beside the executable in an unpacked package: `<prefix>/lib/libdnnl.so.3` for
//!    `<prefix>/bin/ctxd` (no `LD_LIBRARY_PATH` needed);
//! 3. ctxd's library cache, `$CTXD_LIB_DIR/libdnnl.so.3` (default `~/.cache/ctxd/lib`) — where
//!    `scripts/fetch-onednn.sh` unpacks the `onednn-cpu-gomp` wheel from PyPI;
//! 4. the dynamic loader's own search (`libdnnl.so.3`, e.g. a system package).
//!
//! Only oneDNN 3.x is accepted (the C API changed at 3.0). The binding exposes what the
//! embedder needs: memory descriptors, matmul primitives with bias and post-ops (sum, GELU),
//! reorders (weights into the layout the kernel wants, f32 → bf16), and the CPU ISA oneDNN
//! detected, which decides whether bf16 runs natively (the `cpu` module names it and decides
//! whether `auto` runs bf16; it builds on this binding, never the other way round).
//!
//! `library` loads the library and makes memory descriptors; `engine` (built on `library`) holds
//! engines, matmul and reorder primitives, their execution, and [`Weights`] (weight matrices in
//! the layouts kernels ask for).
//!
//! Threading: the library is the GNU OpenMP build. Every worker of BERT's fast path calls
//! [`Dnnl::single_threaded`] first, so each ctxd worker thread runs its kernels on itself and the
//! number of busy cores equals the number of workers (no OpenMP pool on top of ctxd's threads).
//! The other architectures' dense layers ([`crate::arch::gemm`]) run on the one model thread and
//! leave OpenMP its pool (one thread per core).

mod engine;
mod library;

pub use engine::{Engine, PostOp, Primitive, Weights};
pub use library::*;
