//! The controller's liveness, for `/healthz`: whether its executor is stuck on one work item.
//!
//! Every call the executor makes is bounded (a live read by `READ_TIMEOUT`, a write by
//! `WRITE_TIMEOUT`), so a work item takes seconds even when the API server is down or hangs: its
//! calls fail, the item is reported failed and retried with backoff. An item still running after
//! [`STUCK_AFTER`] means the loop itself is wedged, which only a restart mends; an API server that
//! is down never makes `/healthz` fail (a restart would not help, and would restart every replica).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A work item running this long means the executor is wedged.
pub const STUCK_AFTER: Duration = Duration::from_secs(300);

/// When the executor's current work item started.
#[derive(Debug)]
pub struct Progress {
    base: Instant,
    /// Milliseconds since `base` + 1 at which the current item started; 0 when idle.
    busy_since: AtomicU64,
}

impl Default for Progress {
    fn default() -> Self {
        Progress { base: Instant::now(), busy_since: AtomicU64::new(0) }
    }
}

impl Progress {
    fn millis(&self) -> u64 {
        Instant::now().saturating_duration_since(self.base).as_millis() as u64 + 1
    }

    /// A work item starts.
    pub(crate) fn started(&self) {
        self.busy_since.store(self.millis(), Ordering::Relaxed);
    }

    /// The work item finished.
    pub(crate) fn finished(&self) {
        self.busy_since.store(0, Ordering::Relaxed);
    }

    /// Why the controller is not live, if it is not: one work item has run for [`STUCK_AFTER`].
    pub fn problem(&self) -> Option<String> {
        let since = self.busy_since.load(Ordering::Relaxed);
        if since == 0 {
            return None;
        }
        let busy = Duration::from_millis(self.millis().saturating_sub(since));
        (busy >= STUCK_AFTER).then(|| format!("controller: one work item has run for {}s", busy.as_secs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Only tokio's clock: paused time.
    #[tokio::test(start_paused = true)]
    async fn live_unless_one_item_runs_past_the_limit() {
        type Step = fn(&Progress);
        let progress = Progress::default();
        let steps: [(&str, Step, Duration, bool); 4] = [
            ("idle for long", |_| {}, STUCK_AFTER * 2, false),
            ("an item running a while", Progress::started, STUCK_AFTER - Duration::from_secs(1), false),
            ("the same item past the limit", |_| {}, Duration::from_secs(1), true),
            ("finished", Progress::finished, Duration::ZERO, false),
        ];
        for (what, step, wait, stuck) in steps {
            step(&progress);
            tokio::time::advance(wait).await;
            assert_eq!(progress.problem().is_some(), stuck, "{what}: {:?}", progress.problem());
        }
    }
}
