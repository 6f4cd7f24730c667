//! What the CPU offers the embedder, in words: the instruction set oneDNN runs (by name),
//! whether bf16 is native, and whether `precision = "auto"` should use it ([`Dnnl::auto_bf16`]).
//! The log line and the `isa` label of `ctxd_embed_backend_info` come from here, as does the
//! sentence a forced bf16 gets on a CPU without native bf16.

use crate::dnnl::{Dnnl, ISA_AVX2_VNNI_2, ISA_AVX512_CORE_BF16};

/// Name of a oneDNN `dnnl_cpu_isa_t` value. The values are bit sets (each ISA includes the
/// bits of those it extends), so the largest known set contained in `isa` names it.
fn isa_name(isa: u32) -> &'static str {
    const NAMES: [(u32, &str); 12] = [
        (0x1fef, "avx512_core_amx_fp16"),
        (0xfef, "avx512_core_amx"),
        (0x1ef, "avx512_core_fp16"),
        (ISA_AVX512_CORE_BF16, "avx512_core_bf16"),
        (ISA_AVX2_VNNI_2, "avx2_vnni_2"),
        (0x67, "avx512_core_vnni"),
        (0x27, "avx512_core"),
        (0x0f, "avx2_vnni"),
        (0x07, "avx2"),
        (0x03, "avx"),
        (0x01, "sse41"),
        (0x00, "baseline"),
    ];
    NAMES.iter().find(|(bits, _)| isa & bits == *bits).map_or("baseline", |(_, name)| name)
}

/// The CPU vendor's cpuid string (`GenuineIntel`, `AuthenticAMD`, …).
fn cpu_vendor() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: cpuid leaf 0 exists on every x86-64 CPU.
        #[allow(unused_unsafe)]
        let r = unsafe { std::arch::x86_64::__cpuid(0) };
        let bytes: Vec<u8> = [r.ebx, r.edx, r.ecx].iter().flat_map(|w| w.to_le_bytes()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "unknown".to_string()
    }
}

impl Dnnl {
    /// The instruction set oneDNN runs its kernels with here, by name (`avx2`,
    /// `avx512_core_bf16`, …): the CPU's best, or less when `ONEDNN_MAX_CPU_ISA` caps it.
    pub fn isa_name(&self) -> &'static str {
        isa_name(self.isa)
    }

    /// Why bf16 does or does not run natively here, in words for a log line or an error:
    /// the instruction set found and, when bf16 is missing, what it would need.
    pub fn bf16_reason(&self) -> String {
        let capped = std::env::var("ONEDNN_MAX_CPU_ISA")
            .map(|v| format!(", capped by ONEDNN_MAX_CPU_ISA={v}"))
            .unwrap_or_default();
        if self.native_bf16() {
            format!("oneDNN runs {} here{capped}, which has native bf16", self.isa_name())
        } else {
            format!(
                "oneDNN runs {} here{capped}: the CPU lacks native bf16 (AVX512-BF16, AMX or AVX2-VNNI-2)",
                self.isa_name()
            )
        }
    }

    /// Whether `precision = "auto"` should run bf16 here, and why (for the log line). Native
    /// bf16 is necessary, not sufficient: AVX512-BF16's dot product does 32 bf16 products per
    /// instruction where an FMA does 16 f32 ones, which doubles the matmul rate only where the
    /// core issues one as often as the other. AMD Zen 4/5 does (measured: bf16 2.0× f32 on an
    /// EPYC); Intel cores issue it on one port against two for FMAs, so without AMX bf16 runs
    /// at the f32 rate plus conversions (measured: 0.62× f32 on a 2-core Xeon VM). So: bf16 when
    /// oneDNN runs bf16 matmuls on AMX, or on an AMD CPU with native bf16; f32 otherwise.
    pub fn auto_bf16(&self) -> (bool, String) {
        let why = self.bf16_reason();
        if !self.native_bf16() {
            return (false, why);
        }
        let Ok(imp) = self.bf16_matmul_impl() else {
            return (false, format!("{why}, but oneDNN could not build a bf16 matmul here: f32"));
        };
        if imp.contains("amx") {
            (true, format!("{why}; bf16 matmuls run on AMX ({imp})"))
        } else if cpu_vendor() == "AuthenticAMD" {
            (true, format!("{why}; on AMD its bf16 dot products run at twice the f32 rate ({imp})"))
        } else {
            (
                false,
                format!(
                    "{why}, but bf16 matmuls would run without AMX ({imp}), at the f32 rate plus conversions on a {} \
                     CPU (measured 0.62x f32): f32 is faster",
                    cpu_vendor()
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn isa_names_follow_the_bit_sets() {
        assert_eq!(super::isa_name(0x07), "avx2");
        assert_eq!(super::isa_name(0x0f), "avx2_vnni");
        assert_eq!(super::isa_name(0x1f), "avx2_vnni_2");
        assert_eq!(super::isa_name(0x27), "avx512_core");
        assert_eq!(super::isa_name(0xe7), "avx512_core_bf16");
        // avx512_core_fp16 and AMX extend avx512_core_bf16 (oneDNN 3.x values).
        assert_eq!(super::isa_name(0x1ef), "avx512_core_fp16");
        assert_eq!(super::isa_name(0xfef), "avx512_core_amx");
        assert_eq!(super::isa_name(0x1fef), "avx512_core_amx_fp16");
        assert_eq!(super::isa_name(0x00), "baseline");
    }
}
