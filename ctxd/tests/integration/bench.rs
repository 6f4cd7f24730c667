//! `ctxd bench --forward`, the figure `scripts/gpu-check.sh` reads: sequences/s per batch and
//! precision, the cosine to sentence-transformers' reference vectors, f16 weights
//! (`scripts/convert-f16.sh`) loaded on the CPU, and a precision the device refuses said in its row.

use serde_json::Value;

use super::support::*;

fn forward_json(extra: &[&str]) -> Value {
    let reference = repo_root().join("models/tests/fixtures/reference.json");
    let mut cmd = ctxd();
    cmd.args(["bench", "--forward", "--device", "cpu", "--batches", "2,3", "--seq-len", "64", "--min-seconds", "0"])
        .arg("--reference")
        .arg(&reference)
        .arg("--json")
        .args(extra);
    serde_json::from_str(&run_ok(&mut cmd)).expect("bench --forward --json prints JSON")
}

#[test]
fn forward_bench_measures_every_batch_and_agrees_with_the_reference() {
    require_model();
    let out = forward_json(&["--precisions", "f32,f16"]);
    assert_eq!(out["seq_len"], 64, "{out}");
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{out}");
    let f32_row = &rows[0];
    assert_eq!((f32_row["device"].as_str(), f32_row["precision"].as_str()), (Some("cpu"), Some("f32")), "{out}");
    let cells = f32_row["seq_per_s"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{out}");
    for (cell, batch) in cells.iter().zip([2, 3]) {
        assert_eq!(cell[0], batch, "{out}");
        assert!(cell[1].as_f64().unwrap() > 0.0, "{out}");
    }
    assert!(f32_row["cosine_min"].as_f64().unwrap() >= 0.999, "{out}");
    // f16 is a GPU precision: on the CPU its row says so instead of failing the run.
    let refused = rows[1]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("f16") && refused.contains("cuda"), "{out}");
}

#[test]
fn half_precision_weights_load_on_the_cpu() {
    require_model();
    let f16 = ctxd_models::resolve::ctxd_model_dir().join("sentence-transformers/all-MiniLM-L6-v2-f16");
    assert!(
        f16.join("model.safetensors").is_file(),
        "the f16 copy of the default model is missing: run scripts/convert-f16.sh (scripts/test.sh does)"
    );
    let out = forward_json(&["--model", f16.to_str().unwrap(), "--precisions", "f32"]);
    let row = &out["rows"][0];
    assert!(row["refused"].is_null(), "{out}");
    let (min, mean) = (row["cosine_min"].as_f64().unwrap(), row["cosine_mean"].as_f64().unwrap());
    assert!(min >= 0.999 && mean >= 0.9995, "f16 weights widened to f32: cosine {min} / {mean}: {out}");
}
