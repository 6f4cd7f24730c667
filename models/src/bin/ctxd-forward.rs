//! `ctxd-forward`: the embedding path alone as a binary — what `ctxd bench --forward` measures
//! ([`ctxd_models::forward`]), with the same flags, in a build small enough for a GPU check to
//! carry (`scripts/build-cuda.sh --forward`, profile `gpu-check`: this crate and its
//! dependencies only, no index, server or parsers). It prints the start-up line of each precision
//! (device, backend, precision and why) on stderr and the figures on stdout:
//!
//! ```text
//! ctxd-forward [--device auto|cpu|cuda:N] [--backend auto|onednn|candle] [--threads N]
//!              [--model SPEC|DIR] [--batches 32,128,512] [--seq-len 256] [--precisions f16,f32]
//!              [--min-seconds 2] [--reference FILE] [--texts FILE] [--profile] [--json]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use ctxd_models::forward::{self, ForwardSpec};
use ctxd_models::resolve::DEFAULT_MODEL;
use ctxd_models::runtime::Runtime;

const USAGE: &str = "usage: ctxd-forward [--device auto|cpu|cuda:N] [--backend auto|onednn|candle] [--threads N] \
    [--model SPEC|DIR] [--batches 32,128,512] [--seq-len 256] [--precisions f16,f32] [--min-seconds 2] \
    [--reference FILE] [--texts FILE] [--profile] [--json]";

/// The flags that take a value.
const FLAGS: [&str; 10] = [
    "--device",
    "--backend",
    "--threads",
    "--model",
    "--batches",
    "--seq-len",
    "--precisions",
    "--min-seconds",
    "--reference",
    "--texts",
];

/// The parsed command line.
struct Args {
    runtime: Runtime,
    model: String,
    spec: ForwardSpec,
    json: bool,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args =
        Args { runtime: Runtime::default(), model: DEFAULT_MODEL.into(), spec: ForwardSpec::default(), json: false };
    while let Some(flag) = argv.next() {
        if flag == "--json" || flag == "--profile" {
            args.json |= flag == "--json";
            args.spec.profile |= flag == "--profile";
            continue;
        }
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.into());
        }
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (flag.clone(), None),
        };
        if !FLAGS.contains(&name.as_str()) {
            return Err(format!("unknown flag {name}\n{USAGE}"));
        }
        let value = match value {
            Some(v) => v,
            None => argv.next().ok_or_else(|| format!("{name} needs a value\n{USAGE}"))?,
        };
        let number = |v: &str| v.parse::<f64>().map_err(|_| format!("{name}: '{v}' is not a number"));
        let list = |v: &str| -> Vec<String> {
            v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
        };
        match name.as_str() {
            "--device" => args.runtime.device = value.parse().map_err(|e| format!("--device: {e}"))?,
            "--backend" => args.runtime.backend = value.parse().map_err(|e| format!("--backend: {e}"))?,
            "--threads" => args.runtime.threads = number(&value)? as usize,
            "--model" => args.model = value,
            "--batches" => {
                args.spec.batches = list(&value)
                    .iter()
                    .map(|b: &String| b.parse().map_err(|_| format!("--batches: '{b}' is not a size")))
                    .collect::<Result<_, _>>()?
            }
            "--seq-len" => args.spec.seq_len = number(&value)? as usize,
            "--precisions" => {
                args.spec.precisions = list(&value)
                    .iter()
                    .map(|p| p.parse().map_err(|e| format!("--precisions: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--min-seconds" => args.spec.min_seconds = number(&value)?,
            "--reference" => args.spec.reference = Some(PathBuf::from(value)),
            "--texts" => args.spec.texts = Some(PathBuf::from(value)),
            _ => unreachable!("{name} is in FLAGS"),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let report = forward::run(&args.spec, &args.model, &args.runtime, &mut |line| eprintln!("ctxd-forward: {line}"));
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            // Each error's message carries its cause.
            eprintln!("ctxd-forward: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("ctxd-forward: writing the figures as JSON: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", report.table());
    }
    ExitCode::SUCCESS
}
