//! The embedding model's runtime keys — `[model] device`, `precision`, `backend`,
//! `endpoint_kind` — and their flags. `Auto` lets ctxd pick at start-up (`ctxd_models::runtime`
//! says how and logs why); which combinations can run (f16 only on a GPU, oneDNN only on the CPU,
//! bf16 on the CPU only through oneDNN) is `ctxd_models::runtime::Runtime::validate`'s, since it
//! needs more than one key.

use std::fmt;
use std::str::FromStr;

use crate::UnknownChoice;

/// `[model] device`: where the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum DeviceChoice {
    /// The GPU when this binary has CUDA and one answers, else the CPU.
    #[default]
    Auto,
    Cpu,
    /// GPU N (`cuda:N`; `cuda` is GPU 0).
    Cuda(usize),
}

/// `[model] precision`: the matmuls' number format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum PrecisionChoice {
    /// bf16 where native and faster than f32, else f32; f16 on a GPU.
    #[default]
    Auto,
    F32,
    Bf16,
    /// GPUs only.
    F16,
}

/// `[model] backend`: what runs the model on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum BackendChoice {
    /// The fast oneDNN path where it loads, candle otherwise.
    #[default]
    Auto,
    /// The fast oneDNN CPU path only.
    Onednn,
    /// candle only.
    Candle,
}

impl FromStr for DeviceChoice {
    type Err = UnknownChoice;

    fn from_str(s: &str) -> Result<Self, UnknownChoice> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            d => d
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| UnknownChoice { value: d.to_string(), valid: "auto, cpu or cuda:N" }),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// `[model] endpoint_kind`: the request form an embedding server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum EndpointKind {
    /// `POST <url>/v1/embeddings` `{"model","input":[…]}` → `{"data":[{"embedding","index"}],"model"}`.
    #[default]
    OpenAi,
    /// `POST <url>/embed` `{"inputs":[…],"normalize":true,"truncate":true}` → `[[…],…]`.
    Tei,
}

words!(PrecisionChoice, "auto, f32, bf16 or f16", Auto = "auto", F32 = "f32", Bf16 = "bf16", F16 = "f16");
words!(BackendChoice, "auto, onednn or candle", Auto = "auto", Onednn = "onednn", Candle = "candle");
words!(EndpointKind, "openai or tei", OpenAi = "openai", Tei = "tei");

from_string!(DeviceChoice, PrecisionChoice, BackendChoice, EndpointKind);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_written_and_an_unknown_one_names_the_valid_ones() {
        for word in ["auto", "cpu", "cuda:0", "cuda:3"] {
            assert_eq!(word.parse::<DeviceChoice>().unwrap().to_string(), word);
        }
        assert_eq!("cuda".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cuda(0));
        for word in ["auto", "f32", "bf16", "f16"] {
            assert_eq!(word.parse::<PrecisionChoice>().unwrap().to_string(), word);
        }
        for word in ["auto", "onednn", "candle"] {
            assert_eq!(word.parse::<BackendChoice>().unwrap().to_string(), word);
        }
        for word in ["openai", "tei"] {
            assert_eq!(word.parse::<EndpointKind>().unwrap().to_string(), word);
        }
        let err = "tpu".parse::<DeviceChoice>().unwrap_err().to_string();
        assert_eq!(err, "'tpu' is not auto, cpu or cuda:N");
        assert!("cuda:x".parse::<DeviceChoice>().is_err());
        assert!("F32".parse::<PrecisionChoice>().unwrap_err().to_string().contains("auto, f32, bf16 or f16"));
        assert!("magic".parse::<BackendChoice>().unwrap_err().to_string().contains("onednn"));
    }

    #[test]
    fn serde_reads_the_same_words_and_refuses_the_same_way() {
        #[derive(serde::Deserialize)]
        struct Keys {
            device: DeviceChoice,
            precision: PrecisionChoice,
        }
        let ok: Keys = serde_json::from_str(r#"{"device":"cuda:1","precision":"bf16"}"#).unwrap();
        assert_eq!((ok.device, ok.precision), (DeviceChoice::Cuda(1), PrecisionChoice::Bf16));
        let bad = serde_json::from_str::<Keys>(r#"{"device":"gpu","precision":"f32"}"#).err().unwrap();
        assert!(bad.to_string().contains("'gpu' is not auto, cpu or cuda:N"), "{bad}");
    }
}
