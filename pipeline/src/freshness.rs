//! Freshness bookkeeping: when each watched change happened, from the source's event to the
//! sink's commit (`ctxd_pipeline_freshness_seconds`, `ctxd_pipeline_freshness_lag_seconds`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::metrics as m;

/// Change times of the paths in flight that came from watch events (not from the scan).
#[derive(Default)]
pub(crate) struct Freshness(Mutex<HashMap<String, SystemTime>>);

impl Freshness {
    /// `rel` changed at `at` (its mtime; the event's time for a removal).
    pub(crate) fn changed(&self, rel: &str, at: SystemTime) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(rel.to_string(), at);
    }

    /// Records the freshness of the committed `paths` that came from watch events.
    pub(crate) fn committed(&self, paths: &[String]) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = SystemTime::now();
        for p in paths {
            if let Some(at) = map.remove(p) {
                let lag = now.duration_since(at).unwrap_or_default().as_secs_f64();
                metrics::histogram!(m::PIPELINE_FRESHNESS_SECONDS).record(lag);
                metrics::gauge!(m::PIPELINE_FRESHNESS_LAG_SECONDS).set(lag);
            }
        }
    }
}
