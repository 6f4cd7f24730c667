//! Where and how the model runs: device, precision, backend, threads.
//!
//! | `device`  | `backend` | `precision` | what runs                                              |
//! |-----------|-----------|-------------|--------------------------------------------------------|
//! | `auto` (default) | any | any | `cuda:0` below when the binary has the `cuda` feature and a GPU answers, else `cpu` |
//! | `cpu`     | `auto`    | `auto`      | [`FastBert`] in bf16 where native bf16 pays (AMX, or AMD's AVX512-BF16: [`crate::dnnl::Dnnl::auto_bf16`]), else f32; candle f32 if oneDNN is missing |
//! | `cpu`     | `onednn`  | `bf16`/`f32`| [`FastBert`]; an error if oneDNN cannot be loaded, or bf16 is asked for on a CPU without native bf16 |
//! | `cpu`     | `candle`  | `f32`       | candle's `BertModel` (padded batches)                   |
//! | `cuda:N`  | `auto`/`candle` | `auto` (= f16)/`f32`/`f16`/`bf16` | candle's `BertModel` on GPU N (needs `--features cuda`) |
//!
//! `threads` (0 = one per core) sets the fast path's worker count; candle uses its own pool.
//!
//! What was picked, and why, is said once: [`Runtime::spawn`] logs one line (device, backend,
//! precision and the reason: the instruction set oneDNN found, whether bf16 is native, whether
//! a GPU answered) and publishes `ctxd_embed_backend_info` with the same facts as labels.

use candle_core::{DType, Device};

use crate::arch::embedder::ArchEmbedder;
use crate::arch::Family;
use crate::bert::BertEmbedder;
use crate::cross::CrossEncoder;
use crate::dnnl::Dnnl;
use crate::fast::{FastBert, Precision};
use crate::loaded::LoadedModel;
use crate::remote::{Endpoint, RemoteEmbedder};
use crate::service::{EmbedService, EmbedServiceConfig};
use crate::{embedder::Embedder, error::ModelError};
use ctxd_choice::{BackendChoice, DeviceChoice, PrecisionChoice};

/// How to run the model (the `[model]` runtime keys of the config).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Runtime {
    pub device: DeviceChoice,
    /// `f16` on CUDA only.
    pub precision: PrecisionChoice,
    pub backend: BackendChoice,
    /// Worker threads of the fast path, 0 = one per core.
    pub threads: usize,
    /// An embedding server to embed through instead of running the model here.
    pub endpoint: Option<Endpoint>,
    /// `[model] query_prefix`: in place of the model card's query prompt.
    pub query_prefix: Option<String>,
    /// `[model] document_prefix`: in place of the model card's document prompt.
    pub document_prefix: Option<String>,
}

/// Where the model runs once `auto` is resolved: a GPU comes opened.
#[derive(Debug)]
enum Resolved {
    Cpu,
    Cuda(usize, Device),
}

impl Resolved {
    /// The device to load onto and its name (`cpu`, `cuda:N`).
    fn opened(self) -> (Device, String) {
        match self {
            Resolved::Cpu => (Device::Cpu, "cpu".to_string()),
            Resolved::Cuda(n, device) => (device, format!("cuda:{n}")),
        }
    }
}

/// A loaded embedder and the facts of the pick ([`Runtime::load`]): what runs it, and why.
pub struct Picked {
    pub embedder: Box<dyn Embedder>,
    /// A short description (`onednn cpu f32 avx2`, `candle cuda:0 f16`): the service's backend.
    pub desc: String,
    /// `onednn` | `candle` | `endpoint`.
    pub backend: &'static str,
    /// `cpu` | `cuda:N` | `remote`.
    pub device: String,
    pub precision: String,
    /// The instruction set oneDNN runs (`avx2`, …), `cuda` on a GPU, `-` on candle's CPU path.
    pub isa: String,
    /// Why this device and precision, in words.
    pub reason: String,
}

/// Whether GPU 0 answers: this binary has candle's CUDA backend, the driver and the CUDA
/// libraries open, and the device opens.
pub fn cuda_answers() -> bool {
    cuda_probe(0).is_ok()
}

/// The one GPU probe (`device = "auto"`, `cuda:N`, [`cuda_answers`]): the libraries first
/// ([`crate::gpu::probe`], so candle never meets a missing one), then candle's device. What
/// answered, or why it cannot be used, in words.
fn cuda_probe(n: usize) -> Result<(Device, String), String> {
    let driver = crate::gpu::probe(n)?;
    let device = Device::new_cuda(n).map_err(|e| format!("cuda:{n} did not open ({e})"))?;
    Ok((device, driver.describe()))
}

/// `cfg` with its padded tokens per forward pass capped at [`crate::arch::CPU_BATCH_TOKENS`] on
/// the CPU: what the candle transformer (non-BERT families, cross-encoders) runs best with.
fn cpu_capped(cfg: EmbedServiceConfig, device: &str) -> EmbedServiceConfig {
    if device == "cpu" {
        EmbedServiceConfig { max_batch_tokens: cfg.max_batch_tokens.min(crate::arch::CPU_BATCH_TOKENS), ..cfg }
    } else {
        cfg
    }
}

impl Picked {
    /// The start-up line: `embedding on cpu with onednn f32: device auto: no NVIDIA driver (…); …`.
    pub fn summary(&self) -> String {
        format!("embedding on {} with {} {}: {}", self.device, self.backend, self.precision, self.reason)
    }
}

impl Runtime {
    /// Checks that the settings can run together, without loading anything; returns every
    /// problem (each key alone is valid by its type, `ctxd_choice`).
    pub fn validate(&self) -> Vec<String> {
        let mut errs = self.endpoint.as_ref().map(Endpoint::validate).unwrap_or_default();
        let cpu = self.device == DeviceChoice::Cpu;
        if cpu && self.precision == PrecisionChoice::F16 {
            errs.push("precision 'f16' is for cuda devices; use precision = 'auto', 'f32' or 'bf16' on the cpu".into());
        }
        if matches!(self.device, DeviceChoice::Cuda(_)) && self.backend == BackendChoice::Onednn {
            errs.push("backend 'onednn' runs on the cpu only; use backend = 'auto' or 'candle' with cuda".into());
        }
        if cpu && self.backend == BackendChoice::Candle && self.precision == PrecisionChoice::Bf16 {
            errs.push("precision 'bf16' on the cpu needs backend 'onednn' or 'auto'".into());
        }
        errs
    }

    /// Loads the model as configured and starts the embedding service; logs what runs it and
    /// why, and publishes `ctxd_embed_backend_info`.
    pub fn spawn(&self, model: &LoadedModel, cfg: EmbedServiceConfig) -> Result<EmbedService, ModelError> {
        let p = self.load(model)?;
        let cfg = if model.family() == Family::Bert { cfg } else { cpu_capped(cfg, &p.device) };
        tracing::info!(
            device = %p.device, backend = p.backend, precision = %p.precision, isa = %p.isa, "{}", p.summary()
        );
        metrics::gauge!(crate::metrics::EMBED_BACKEND_INFO, "backend" => p.backend, "device" => p.device,
            "precision" => p.precision, "isa" => p.isa)
        .set(1.0);
        Ok(EmbedService::spawn(p.embedder, cfg).with_backend(p.desc).with_card(model.card().clone()))
    }

    /// Loads the cross-encoder `loaded` ([`crate::cross`]) on candle in f32 on the device this
    /// runtime resolves to and starts its service (its own model thread); logs what runs it.
    pub fn spawn_reranker(&self, loaded: &LoadedModel) -> Result<EmbedService, ModelError> {
        let (resolved, why) = self.resolve_device()?;
        let (device, name) = resolved.opened();
        let dnnl = self.arch_gemm(&device)?;
        let model = CrossEncoder::load(loaded, device, dnnl.as_ref())?;
        tracing::info!(model = %loaded.model_id(), "reranking with the cross-encoder on {name} with candle f32: {why}");
        let cfg = cpu_capped(EmbedServiceConfig::default(), &name);
        Ok(EmbedService::spawn(model, cfg).with_backend(format!("candle {name} f32 cross-encoder")))
    }

    /// The device `auto` resolves to (and why), or the configured one. A GPU comes back opened.
    fn resolve_device(&self) -> Result<(Resolved, String), ModelError> {
        let cuda_error =
            |n: usize, why: String| ModelError::Backend(format!("cuda:{n}: {why}; use device = \"cpu\" or \"auto\""));
        match self.device {
            DeviceChoice::Cpu => Ok((Resolved::Cpu, "device cpu as configured".into())),
            DeviceChoice::Cuda(n) => {
                let (device, driver) = cuda_probe(n).map_err(|why| cuda_error(n, why))?;
                Ok((Resolved::Cuda(n, device), format!("device cuda:{n} as configured ({driver})")))
            }
            DeviceChoice::Auto if self.backend == BackendChoice::Onednn => {
                Ok((Resolved::Cpu, "device auto with backend onednn: the cpu".into()))
            }
            DeviceChoice::Auto => match cuda_probe(0) {
                Ok((device, driver)) => {
                    Ok((Resolved::Cuda(0, device), format!("device auto: cuda:0 answered ({driver})")))
                }
                Err(why) => Ok((Resolved::Cpu, format!("device auto: {why}"))),
            },
        }
    }

    /// Loads the model as configured, without a service around it (benchmarks drive it
    /// directly); [`Runtime::spawn`] is this plus the service, the log line and the metric.
    pub fn load(&self, loaded: &LoadedModel) -> Result<Picked, ModelError> {
        if let Some(first) = self.validate().into_iter().next() {
            return Err(ModelError::Runtime(first));
        }
        if let Some(endpoint) = &self.endpoint {
            let model = RemoteEmbedder::new(loaded, endpoint.clone())?;
            return Ok(Picked {
                embedder: Box::new(model),
                desc: format!("{} endpoint {}", endpoint.kind.as_str(), endpoint.request_url()),
                backend: "endpoint",
                device: "remote".into(),
                precision: "-".into(),
                isa: "-".into(),
                reason: format!(
                    "[model] endpoint as configured ({} requests of {} texts, {} in flight)",
                    endpoint.kind.as_str(),
                    endpoint.batch,
                    endpoint.in_flight
                ),
            });
        }
        let (device, why_device) = self.resolve_device()?;
        if loaded.family() != Family::Bert {
            return self.load_arch(loaded, device, why_device);
        }
        match device {
            Resolved::Cuda(n, device) => {
                let (dtype, precision) = match self.precision {
                    PrecisionChoice::F32 => (DType::F32, "f32"),
                    PrecisionChoice::Bf16 => (DType::BF16, "bf16"),
                    PrecisionChoice::Auto | PrecisionChoice::F16 => (DType::F16, "f16"),
                };
                let model = BertEmbedder::load_as(loaded, device, dtype)?;
                let desc = format!("candle cuda:{n} {precision}");
                let how =
                    if self.precision == PrecisionChoice::Auto { "auto picks f16 on a GPU" } else { "as configured" };
                Ok(Picked {
                    embedder: Box::new(model),
                    desc,
                    backend: "candle",
                    device: format!("cuda:{n}"),
                    precision: precision.into(),
                    isa: "cuda".into(),
                    reason: format!("{why_device}; {precision} {how}"),
                })
            }
            Resolved::Cpu => {
                if self.precision == PrecisionChoice::F16 {
                    return Err(ModelError::Runtime(format!(
                        "precision 'f16' runs on cuda devices only, and {why_device}; use precision = 'auto'"
                    )));
                }
                let backend = self.backend;
                let candle = |reason: String| -> Result<Picked, ModelError> {
                    let model = BertEmbedder::load(loaded, Device::Cpu)?;
                    Ok(Picked {
                        embedder: Box::new(model),
                        desc: "candle cpu f32".into(),
                        backend: "candle",
                        device: "cpu".into(),
                        precision: "f32".into(),
                        isa: "-".into(),
                        reason,
                    })
                };
                if backend == BackendChoice::Candle {
                    if self.precision == PrecisionChoice::Bf16 {
                        return Err(ModelError::Runtime(format!(
                            "precision 'bf16' on the cpu needs backend 'onednn' or 'auto', and {why_device}"
                        )));
                    }
                    return candle(format!("{why_device}; backend candle as configured"));
                }
                match self.fast(loaded) {
                    Ok(model) => {
                        let reason = format!("{why_device}; {}", model.precision_reason());
                        let (desc, precision, isa) =
                            (model.backend.clone(), model.precision().name().to_string(), model.isa().to_string());
                        Ok(Picked {
                            embedder: Box::new(model),
                            desc,
                            backend: "onednn",
                            device: "cpu".into(),
                            precision,
                            isa,
                            reason,
                        })
                    }
                    Err(e) if backend == BackendChoice::Auto && self.precision != PrecisionChoice::Bf16 => {
                        tracing::warn!(
                            "fast cpu embedder unavailable ({e}); using candle f32, which is several times slower \
                             (scripts/fetch-onednn.sh installs onednn)"
                        );
                        candle(format!("{why_device}; oneDNN unavailable, candle f32"))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// A non-BERT family ([`crate::arch`]): candle in f32 on the resolved device; oneDNN's fast
    /// path and the reduced precisions are BERT's.
    fn load_arch(&self, loaded: &LoadedModel, device: Resolved, why_device: String) -> Result<Picked, ModelError> {
        let family = loaded.family().name();
        if !matches!(self.precision, PrecisionChoice::Auto | PrecisionChoice::F32) {
            return Err(ModelError::Runtime(format!(
                "precision '{}' is for BERT encoders; {family} runs in f32: use precision = 'auto' or 'f32'",
                self.precision
            )));
        }
        let (device, name) = device.opened();
        let dnnl = self.arch_gemm(&device)?;
        let model = ArchEmbedder::load(loaded, device, dnnl.as_ref())?;
        let (backend, desc, isa, how) = match &dnnl {
            Some(d) => (
                "onednn",
                format!("candle {name} f32 {family}, oneDNN matmuls"),
                d.isa_name().to_string(),
                "on candle with oneDNN's matmuls",
            ),
            None => ("candle", format!("candle {name} f32 {family}"), "-".to_string(), "on candle"),
        };
        Ok(Picked {
            embedder: Box::new(model),
            desc,
            backend,
            device: name,
            precision: "f32".into(),
            isa,
            reason: format!("{why_device}; {family} runs {how} in f32; {}", loaded.card().describe()),
        })
    }

    /// oneDNN for the dense layers of a non-BERT model or a cross-encoder on the CPU: with
    /// `backend = "auto"` where it loads (candle's GEMM with a warning where not), required with
    /// `"onednn"`, never with `"candle"` or on a GPU.
    fn arch_gemm(&self, device: &Device) -> Result<Option<Dnnl>, ModelError> {
        if !device.is_cpu() {
            return Ok(None);
        }
        match self.backend {
            BackendChoice::Candle => Ok(None),
            BackendChoice::Onednn => Dnnl::load().map(Some),
            BackendChoice::Auto => match Dnnl::load() {
                Ok(d) => Ok(Some(d)),
                Err(e) => {
                    tracing::warn!("oneDNN unavailable ({e}): dense layers on candle's GEMM, about half as fast");
                    Ok(None)
                }
            },
        }
    }

    fn fast(&self, loaded: &LoadedModel) -> Result<FastBert, ModelError> {
        let precision = match self.precision {
            PrecisionChoice::F32 => Some(Precision::F32),
            PrecisionChoice::Bf16 => Some(Precision::Bf16),
            PrecisionChoice::Auto | PrecisionChoice::F16 => None,
        };
        FastBert::load(loaded, precision, self.threads)
    }
}

#[cfg(test)]
mod tests {
    use super::Runtime;

    fn rt(device: &str, precision: &str, backend: &str) -> Runtime {
        let (device, precision, backend) = (device.parse(), precision.parse(), backend.parse());
        Runtime {
            device: device.unwrap(),
            precision: precision.unwrap(),
            backend: backend.unwrap(),
            ..Runtime::default()
        }
    }

    #[test]
    fn validation_reports_every_combination_that_cannot_run() {
        assert!(Runtime::default().validate().is_empty());
        assert_eq!(Runtime::default().device.to_string(), "auto");
        assert!(rt("auto", "f16", "auto").validate().is_empty(), "f16 is checked once the device is known");
        assert!(rt("cuda:1", "f16", "auto").validate().is_empty());
        assert!(rt("cpu", "f32", "candle").validate().is_empty());
        assert!(rt("cpu", "f16", "auto").validate()[0].contains("f16' is for cuda"));
        assert_eq!(rt("cuda:0", "f32", "onednn").validate().len(), 1);
        assert_eq!(rt("cpu", "bf16", "candle").validate().len(), 1);
        assert_eq!(rt("cpu", "f16", "candle").validate().len(), 1);
    }
}

#[cfg(all(test, not(feature = "cuda")))]
mod auto_tests {
    use super::{Resolved, Runtime};

    #[test]
    fn auto_device_is_the_cpu_without_the_cuda_feature() {
        let (spec, why) = Runtime::default().resolve_device().unwrap();
        assert!(matches!(spec, Resolved::Cpu));
        assert!(why.contains("no cuda support") && why.contains("build-cuda.sh"), "{why}");
        let pinned = Runtime { device: ctxd_choice::DeviceChoice::Cpu, ..Runtime::default() };
        assert!(matches!(pinned.resolve_device().unwrap().0, Resolved::Cpu));
        let gpu = Runtime { device: ctxd_choice::DeviceChoice::Cuda(0), ..Runtime::default() };
        let err = gpu.resolve_device().unwrap_err().to_string();
        assert!(err.contains("cuda:0") && err.contains("build-cuda.sh") && err.contains("\"cpu\""), "{err}");
    }
}
