//! The `ctxd-forward` binary, the build a GPU check carries: its start-up line says where the
//! model runs and why (here: a CPU-only build, so `device auto` names the missing cuda support;
//! scripts/cuda-smoke.sh checks the CUDA build's line where no driver exists), its JSON figures
//! agree with sentence-transformers' reference vectors, texts run end to end through the
//! embedding service, a GPU the binary cannot use is refused in its row, and a bad flag exits 2.
//! Needs the default model installed (`scripts/fetch-model.sh`).

use std::path::Path;
use std::process::{Command, Output};

mod common;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxd-forward")).args(args).output().expect("ctxd-forward runs")
}

fn json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ctxd-forward failed: {}{stdout}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).expect("--json prints JSON")
}

#[test]
fn start_line_figures_and_end_to_end_texts() {
    let reference = common::manifest_dir().join("tests/fixtures/reference.json");
    let texts = std::env::temp_dir().join(format!("ctxd-forward-texts-{}.jsonl", std::process::id()));
    let lines: Vec<String> =
        (0..12).map(|i| serde_json::to_string(&format!("def f{i}(x):\n    return x + {i}")).unwrap()).collect();
    std::fs::write(&texts, lines.join("\n")).unwrap();
    let out = run(&[
        "--device",
        "auto",
        "--precisions",
        "f32",
        "--batches",
        "2,3",
        "--seq-len",
        "32",
        "--min-seconds",
        "0",
        "--reference",
        path(&reference),
        "--texts",
        path(&texts),
        "--json",
    ]);
    std::fs::remove_file(&texts).ok();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let figures = json(&out);
    let row = &figures["rows"][0];
    assert_eq!(figures["batches"], serde_json::json!([2, 3]), "{figures}");
    assert!(row["refused"].is_null(), "{figures}");
    let line = stderr.lines().find(|l| l.starts_with("ctxd-forward: embedding on ")).unwrap_or_default();
    let device = row["device"].as_str().unwrap();
    assert!(line.starts_with(&format!("ctxd-forward: embedding on {device} with ")), "{stderr}");
    if device == "cpu" {
        // Why the CPU, in words: a CPU build lacks cuda; a CUDA build names what it did not find.
        assert!(line.contains(": device auto: "), "{stderr}");
        let why = if ctxd_models::CUDA_BUILT { "NVIDIA" } else { "no cuda support" };
        assert!(line.contains(why), "{stderr}");
    }
    assert_eq!(row["reason"].as_str().map(|r| line.contains(r)), Some(true), "{stderr} {figures}");
    assert!(row["cosine_min"].as_f64().unwrap() >= 0.999, "{figures}");
    assert!(row["texts_per_s"].as_f64().unwrap() > 0.0, "{figures}");
    assert_eq!(row["seq_per_s"].as_array().unwrap().len(), 2, "{figures}");
}

#[test]
fn a_gpu_it_cannot_use_is_refused_in_its_row() {
    if ctxd_models::runtime::cuda_answers() {
        eprintln!("skipped: a GPU answers here, so cuda:0 is not refused");
        return;
    }
    let out = run(&[
        "--device",
        "cuda:0",
        "--precisions",
        "f32",
        "--batches",
        "1",
        "--seq-len",
        "8",
        "--min-seconds",
        "0",
        "--json",
    ]);
    let figures = json(&out);
    let refused = figures["rows"][0]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("cuda:0") && refused.contains("\"cpu\""), "{figures}");
}

#[test]
fn a_bad_flag_exits_2_and_says_which() {
    let out = run(&["--batch", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown flag --batch"));
    let out = run(&["--batches"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--batches needs a value"));
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
