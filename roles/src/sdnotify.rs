//! systemd's notify protocol (`Type=notify`, `WatchdogSec=`), without libsystemd: datagrams
//! to the socket named by `$NOTIFY_SOCKET` (a path, or `@name` for an abstract socket).
//!
//! * `READY=1` once the HTTP API is listening (queries work; `/readyz` tells whether the
//!   initial scan is committed, which on a first index of a big repository can take far
//!   longer than any start timeout should),
//! * `STATUS=…` for `systemctl status` (scanning / ready / draining),
//! * `WATCHDOG=1` every half `$WATCHDOG_USEC` from a tokio task, so a wedged runtime gets the
//!   daemon restarted,
//! * `STOPPING=1` when the drain starts.
//!
//! Without `$NOTIFY_SOCKET` (not under systemd) every call is a no-op.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Sends one notification (`KEY=value` lines); errors are logged, never fatal.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let sock = match UnixDatagram::unbound() {
        Ok(s) => s,
        Err(e) => return tracing::warn!("sd_notify: {e}"),
    };
    let bytes = path.as_encoded_bytes();
    let sent = if let Some(name) = bytes.strip_prefix(b"@") {
        abstract_addr(name).and_then(|addr| sock.send_to_addr(state.as_bytes(), &addr))
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(&path))
    };
    if let Err(e) = sent {
        tracing::warn!("sd_notify to {}: {e}", path.to_string_lossy());
    }
}

fn abstract_addr(name: &[u8]) -> std::io::Result<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    std::os::unix::net::SocketAddr::from_abstract_name(name)
}

/// The watchdog period systemd asked for (`$WATCHDOG_USEC`, for this process).
pub fn watchdog_interval() -> Option<Duration> {
    if let Some(pid) = std::env::var("WATCHDOG_PID").ok().and_then(|p| p.parse::<u32>().ok()) {
        if pid != std::process::id() {
            return None;
        }
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Pings the watchdog at half its period until the process exits.
pub fn spawn_watchdog() {
    let Some(period) = watchdog_interval() else { return };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period / 2);
        loop {
            tick.tick().await;
            notify("WATCHDOG=1");
        }
    });
}
