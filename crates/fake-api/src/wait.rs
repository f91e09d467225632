//! Waiting for something to happen instead of sleeping for a guessed time: poll a condition until
//! it holds, with a deadline generous enough for a loaded CI machine. A test that waits this way
//! takes as long as the thing takes, not as long as the worst case someone guessed.
//!
//! The clock is tokio's, so these work under `#[tokio::test(start_paused = true)]` too (each poll
//! interval then passes at once when nothing else is due). A sleep stays only where the test
//! measures real time (a real socket's timeout, CPU while idle) or needs a quiet period to show
//! that nothing happens; such a sleep says why in a comment.

use std::time::Duration;

/// How long a condition gets before the test fails. Nothing a test waits for takes more than a
/// few hundred milliseconds on an idle machine; the rest is headroom for a busy one.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// How often the condition is checked.
pub const POLL: Duration = Duration::from_millis(10);

/// Polls `check` until it returns true or `limit` passes: whether it held.
pub async fn within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    within_async(limit, async || check()).await
}

/// [`within`] for a check that awaits (a request, a scrape).
#[allow(clippy::disallowed_methods, reason = "eventually: polls the condition at a fixed interval until the deadline")]
pub async fn within_async(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let until = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` until it returns true; fails the test naming `what` after [`DEADLINE`].
pub async fn eventually(what: &str, check: impl FnMut() -> bool) {
    assert!(within(DEADLINE, check).await, "timed out after {DEADLINE:?} waiting for: {what}");
}

/// [`eventually`] for a check that awaits (a request, a scrape).
pub async fn eventually_async(what: &str, check: impl AsyncFnMut() -> bool) {
    assert!(within_async(DEADLINE, check).await, "timed out after {DEADLINE:?} waiting for: {what}");
}

/// Polls `find` until it returns something; fails the test naming `what` after [`DEADLINE`].
pub async fn eventually_some<T>(what: &str, mut find: impl FnMut() -> Option<T>) -> T {
    let mut found = None;
    eventually(what, || {
        found = find();
        found.is_some()
    })
    .await;
    found.expect("checked")
}

/// [`eventually`] outside a runtime (a test on plain threads): polls with `std::thread::sleep`.
#[allow(clippy::disallowed_methods, reason = "eventually: polls the condition at a fixed interval until the deadline")]
pub fn eventually_blocking(what: &str, mut check: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + DEADLINE;
    while !check() {
        assert!(std::time::Instant::now() < until, "timed out after {DEADLINE:?} waiting for: {what}");
        std::thread::sleep(POLL);
    }
}
