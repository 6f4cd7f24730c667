//! Where and how the model runs: device, precision, backend, threads.
//!
//! | `device`  | `backend` | `precision` | what runs                                              |
//! |-----------|-----------|-------------|--------------------------------------------------------|
//! | `cpu`     | `auto`    | `auto`      | [`FastBert`] in bf16 if the CPU has native bf16, else f32; candle f32 if oneDNN is missing |
//! | `cpu`     | `onednn`  | `bf16`/`f32`| [`FastBert`]; an error if oneDNN cannot be loaded       |
//! | `cpu`     | `candle`  | `f32`       | candle's `BertModel` (padded batches)                   |
//! | `cuda:N`  | `auto`/`candle` | `auto`/`f32`/`f16`/`bf16` | candle's `BertModel` on GPU N (needs `--features cuda`) |
//!
//! `threads` (0 = one per core) sets the fast path's worker count; candle uses its own pool.

use candle_core::{DType, Device};

use crate::fast::{FastBert, Precision};
use crate::service::{EmbedService, EmbedServiceConfig};
use crate::{BertEmbedder, ModelError, ModelFiles};

/// Backend choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The fast path when possible, candle otherwise.
    Auto,
    /// The fast CPU path only.
    Onednn,
    /// candle only.
    Candle,
}

/// How to run the model (the `[model]` runtime keys of the config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// `auto`, `f32`, `bf16` (and `f16` on CUDA).
    pub precision: String,
    /// `auto`, `onednn` or `candle`.
    pub backend: String,
    /// Worker threads of the fast path, 0 = one per core.
    pub threads: usize,
}

impl Default for Runtime {
    fn default() -> Self {
        Self { device: "cpu".into(), precision: "auto".into(), backend: "auto".into(), threads: 0 }
    }
}

enum DeviceSpec {
    Cpu,
    Cuda(usize),
}

impl Runtime {
    fn device_spec(&self) -> Result<DeviceSpec, ModelError> {
        match self.device.as_str() {
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(0)),
            d => d
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceSpec::Cuda)
                .ok_or_else(|| ModelError::Runtime(format!("device '{d}' is not 'cpu' or 'cuda:N'"))),
        }
    }

    fn backend_kind(&self) -> Result<Backend, ModelError> {
        match self.backend.as_str() {
            "auto" => Ok(Backend::Auto),
            "onednn" => Ok(Backend::Onednn),
            "candle" => Ok(Backend::Candle),
            b => Err(ModelError::Runtime(format!("backend '{b}' is not auto, onednn or candle"))),
        }
    }

    /// Checks the settings without loading anything; returns every problem.
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        let device = self.device_spec();
        if let Err(e) = &device {
            errs.push(e.to_string());
        }
        let backend = self.backend_kind();
        if let Err(e) = &backend {
            errs.push(e.to_string());
        }
        let cuda = matches!(device, Ok(DeviceSpec::Cuda(_)));
        match (self.precision.as_str(), cuda) {
            ("auto" | "f32" | "bf16", _) | ("f16", true) => {}
            (p, _) => errs.push(format!(
                "precision '{p}' is not auto, f32 or bf16{}",
                if cuda { " or f16" } else { " (f16 is for cuda devices)" }
            )),
        }
        if cuda && matches!(backend, Ok(Backend::Onednn)) {
            errs.push("backend 'onednn' runs on the cpu only; use backend = 'auto' or 'candle' with cuda".into());
        }
        if !cuda && matches!(backend, Ok(Backend::Candle)) && self.precision == "bf16" {
            errs.push("precision 'bf16' on the cpu needs backend 'onednn' or 'auto'".into());
        }
        errs
    }

    /// Loads the model as configured and starts the embedding service; publishes
    /// `ctxd_embed_backend_info`.
    pub fn spawn(&self, files: &ModelFiles, cfg: EmbedServiceConfig) -> Result<EmbedService, ModelError> {
        let (service, backend, precision) = self.spawn_inner(files, cfg)?;
        metrics::gauge!(crate::metrics::EMBED_BACKEND_INFO, "backend" => backend, "device" => self.device.clone(),
            "precision" => precision)
        .set(1.0);
        Ok(service)
    }

    /// The service, the backend that runs it (`onednn` | `candle`) and its precision.
    fn spawn_inner(
        &self,
        files: &ModelFiles,
        cfg: EmbedServiceConfig,
    ) -> Result<(EmbedService, &'static str, String), ModelError> {
        if let Some(first) = self.validate().into_iter().next() {
            return Err(ModelError::Runtime(first));
        }
        match self.device_spec()? {
            DeviceSpec::Cuda(n) => {
                let device = Device::new_cuda(n).map_err(|e| {
                    ModelError::Backend(format!(
                        "cuda:{n}: {e} (build ctxd with `--features cuda` on a machine with the cuda toolkit)"
                    ))
                })?;
                let (dtype, precision) = match self.precision.as_str() {
                    "f16" => (DType::F16, "f16"),
                    "bf16" => (DType::BF16, "bf16"),
                    _ => (DType::F32, "f32"),
                };
                let model = BertEmbedder::load_as(files, device, dtype)?;
                let desc = format!("candle cuda:{n} {precision}");
                Ok((EmbedService::spawn(model, cfg).with_backend(desc), "candle", precision.into()))
            }
            DeviceSpec::Cpu => {
                let backend = self.backend_kind()?;
                let candle = |cfg| -> Result<_, ModelError> {
                    let model = BertEmbedder::load(files, Device::Cpu)?;
                    Ok((EmbedService::spawn(model, cfg).with_backend("candle cpu f32".into()), "candle", "f32".into()))
                };
                if backend == Backend::Candle {
                    return candle(cfg);
                }
                match self.fast(files) {
                    Ok(model) => {
                        let (desc, precision) = (model.backend.clone(), model.precision().name().to_string());
                        Ok((EmbedService::spawn(model, cfg).with_backend(desc), "onednn", precision))
                    }
                    Err(e) if backend == Backend::Auto && self.precision != "bf16" => {
                        tracing::warn!(
                            "fast cpu embedder unavailable ({e}); using candle f32, which is several times slower \
                             (scripts/fetch-onednn.sh installs onednn)"
                        );
                        candle(cfg)
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn fast(&self, files: &ModelFiles) -> Result<FastBert, ModelError> {
        let precision = match self.precision.as_str() {
            "f32" => Some(Precision::F32),
            "bf16" => Some(Precision::Bf16),
            _ => None,
        };
        FastBert::load(files, precision, self.threads)
    }
}

#[cfg(test)]
mod tests {
    use super::Runtime;

    fn rt(device: &str, precision: &str, backend: &str) -> Runtime {
        Runtime { device: device.into(), precision: precision.into(), backend: backend.into(), threads: 0 }
    }

    #[test]
    fn validation_reports_every_problem() {
        assert!(Runtime::default().validate().is_empty());
        assert!(rt("cuda:1", "f16", "auto").validate().is_empty());
        assert!(rt("cpu", "f32", "candle").validate().is_empty());
        let errs = rt("tpu", "int4", "magic").validate();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].contains("tpu"));
        assert!(rt("cpu", "f16", "auto").validate()[0].contains("f16 is for cuda"));
        assert_eq!(rt("cuda:0", "f32", "onednn").validate().len(), 1);
        assert_eq!(rt("cpu", "bf16", "candle").validate().len(), 1);
    }
}
