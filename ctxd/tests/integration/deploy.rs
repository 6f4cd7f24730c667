//! What operators deploy: the alert rules pass promtool, the systemd unit and manifests are
//! hardened and match the daemon's flags, and readiness, watchdog and stopping reach systemd.

use std::process::Command;
use std::time::Duration;

use super::support::*;

#[test]
fn alert_rules_pass_promtool() {
    let rules = repo_root().join("dashboards/ctxd-alerts.yml");
    let text = std::fs::read_to_string(&rules).unwrap();
    for alert in
        ["CtxdPipelineStalled", "CtxdStageErrors", "CtxdFreshnessLag", "CtxdQueryLatencyHigh", "CtxdQueriesRefused"]
    {
        assert!(text.contains(&format!("alert: {alert}")), "missing {alert}");
    }
    // scripts/test.sh installs promtool (Debian package prometheus) and names it here.
    let Some(promtool) = std::env::var_os("CTXD_TEST_PROMTOOL") else {
        eprintln!("CTXD_TEST_PROMTOOL unset: rules checked for presence only (scripts/test.sh sets it)");
        return;
    };
    let out = Command::new(promtool).args(["check", "rules"]).arg(&rules).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "promtool: {report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(report.contains("SUCCESS: 9 rules found"), "{report}");
}

/// `KEY=value` settings of a systemd unit (last one wins).
fn unit_settings(text: &str) -> std::collections::HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn deploy_files_are_hardened_and_match_the_daemon() {
    let unit = unit_settings(&std::fs::read_to_string(repo_root().join("deploy/ctxd.service")).unwrap());
    for (key, want) in [
        ("Type", "notify"),
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ReadWritePaths", "/var/lib/ctxd"),
        ("KillSignal", "SIGTERM"),
    ] {
        assert_eq!(unit.get(key).map(String::as_str), Some(want), "ctxd.service {key}");
    }
    assert!(unit["ExecStart"].contains("ctxd serve --config"), "{:?}", unit["ExecStart"]);
    assert!(unit.contains_key("WatchdogSec"));
    let stop: u64 = unit["TimeoutStopSec"].parse().unwrap();
    let drain = ctxd_config::Config::default().pipeline.drain_timeout_secs;
    assert!(stop > drain, "systemd must wait longer ({stop}s) than the drain ({drain}s)");

    for file in ["Dockerfile", "Dockerfile.cuda"] {
        let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
        let has = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
        assert!(has("FROM ") >= 2, "{file}: multi-stage");
        let user = lines.iter().rev().find(|l| l.starts_with("USER ")).expect("a USER");
        assert!(!user.contains("root") && !user.ends_with(" 0"), "{file}: non-root runtime");
        let volume = lines.iter().find(|l| l.starts_with("VOLUME")).expect("VOLUME");
        assert!(volume.contains("/data") && volume.contains("/models"), "{file}");
        assert!(text.contains("HEALTHCHECK") && text.contains("/readyz") && text.contains("CTXD_AUTH_TOKEN"), "{file}");
        // The same scripts the README's set-up uses (the model from its PyPI wheel).
        assert!(text.contains("scripts/fetch-model.sh") && text.contains("cargo build --release -p ctxd"), "{file}");
        assert!(text.contains("\"serve\""), "{file}: runs the daemon");
    }
    assert!(std::fs::read_to_string(repo_root().join("Dockerfile.cuda")).unwrap().contains("--features cuda"));
    // The image from the package (scripts/package.sh): no toolchain, the same runtime rules.
    let text = std::fs::read_to_string(repo_root().join("Dockerfile.package")).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
    assert!(!text.contains("cargo ") && lines.iter().filter(|l| l.starts_with("FROM ")).count() == 1);
    assert!(lines.iter().any(|l| l.starts_with("ADD ${PACKAGE}")), "unpacks the package");
    let user = lines.iter().rev().find(|l| l.starts_with("USER ")).expect("a USER");
    assert!(!user.contains("root") && !user.ends_with(" 0"), "Dockerfile.package: non-root runtime");
    assert!(text.contains("HEALTHCHECK") && text.contains("/readyz") && text.contains("\"serve\""));
    let pkg = std::fs::read_to_string(repo_root().join("scripts/package.sh")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(text.contains(&format!("ARG PACKAGE=dist/ctxd-{version}-x86_64-linux.tar.gz")), "the version's package");
    assert!(pkg.contains("\"ctxd-$version-x86_64-linux\""), "scripts/package.sh names it so");
}

#[test]
fn systemd_readiness_watchdog_and_stopping_notifications() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 3);
    let sock_path = tmp.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut cmd = ctxd();
    cmd.arg("serve").env("NOTIFY_SOCKET", &sock_path).env("WATCHDOG_USEC", "400000");
    let d = Daemon::spawn(cmd, &root, &tmp.path().join("db"));
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !(seen.iter().any(|m: &String| m.contains("READY=1"))
        && seen.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2)
    {
        let n = sock.recv(&mut buf).expect("notifications before the timeout");
        seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert_eq!(d.get("/healthz").status().as_u16(), 200, "READY=1 means the API answers");
    assert!(d.sigterm().success());
    loop {
        let n = sock.recv(&mut buf).expect("STOPPING=1 on SIGTERM");
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        if msg.contains("STOPPING=1") {
            break;
        }
    }
}

/// An unpacked package's layout — `bin/ctxd`, `lib/libdnnl.so.3`, `share/ctxd/models/…` — runs
/// with an empty environment and an empty home: the library and the model are found beside the
/// executable (no `LD_LIBRARY_PATH`, no cache, no network).
#[test]
fn a_package_layout_runs_from_any_folder_with_an_empty_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("ctxd-pkg");
    for dir in ["bin", "lib", "share/ctxd/models/sentence-transformers"] {
        std::fs::create_dir_all(prefix.join(dir)).unwrap();
    }
    let exe = prefix.join("bin/ctxd");
    // A hard link where the file system allows (the debug binary is large), else a copy.
    std::fs::hard_link(env!("CARGO_BIN_EXE_ctxd"), &exe)
        .or_else(|_| std::fs::copy(env!("CARGO_BIN_EXE_ctxd"), &exe).map(|_| ()))
        .unwrap();
    let home = std::path::PathBuf::from(std::env::var_os("HOME").unwrap());
    let model = home.join(".cache/ctxd/models/sentence-transformers/all-MiniLM-L6-v2");
    if !model.join("model.safetensors").exists() {
        eprintln!("skipped: the default model is not in ~/.cache/ctxd/models (scripts/fetch-model.sh installs it)");
        return;
    }
    copy_dir(&model, &prefix.join("share/ctxd/models/sentence-transformers/all-MiniLM-L6-v2"));
    let dnnl = home.join(".cache/ctxd/lib/libdnnl.so.3");
    let with_dnnl = dnnl.exists() && std::fs::copy(&dnnl, prefix.join("lib/libdnnl.so.3")).is_ok();
    let empty_home = tmp.path().join("empty-home");
    std::fs::create_dir_all(&empty_home).unwrap();
    let root = tmp.path().join("demo");
    copy_dir(&repo_root().join("examples/demo"), &root);
    let run = |args: &[&str]| {
        let out = Command::new(&exe)
            .args(args)
            .env_clear()
            .env("HOME", &empty_home)
            .env("PATH", "/usr/bin:/bin")
            .env("HF_HUB_OFFLINE", "1")
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (_, log) = run(&["index", "demo", "--db", "db", "--json"]);
    if with_dnnl {
        let packaged = prefix.join("lib/libdnnl.so.3");
        assert!(log.contains(&packaged.display().to_string()), "oneDNN from the package's lib/: {log}");
    }
    let (out, _) = run(&["search", "check whether a password matches the stored hash", "--db", "db", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"][0]["path"], "src/auth.rs", "{v}");
    assert!(!empty_home.join(".cache").exists(), "nothing was downloaded or cached under HOME");
}
