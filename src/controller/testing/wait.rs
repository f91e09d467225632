//! Waiting for something to happen instead of sleeping for a guessed time: poll a condition until
//! it holds, with a deadline generous enough for a loaded CI machine. On tokio's clock, so it works
//! under paused time too. (The integration tests have the same helpers in `tests/support/wait.rs`;
//! unit tests cannot reach those.)

use std::time::Duration;

/// How long a condition gets before the test fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);

/// Polls `check` until it returns true or `limit` passes: whether it held.
pub(crate) async fn within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = tokio::time::Instant::now() + limit;
    while !check() {
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

/// Polls `check` until it returns true; fails the test naming `what` after [`DEADLINE`].
pub(crate) async fn eventually(what: &str, check: impl FnMut() -> bool) {
    assert!(within(DEADLINE, check).await, "timed out after {DEADLINE:?} waiting for: {what}");
}

/// Polls `find` until it returns something; fails the test naming `what` after [`DEADLINE`].
pub(crate) async fn eventually_some<T>(what: &str, mut find: impl FnMut() -> Option<T>) -> T {
    let mut found = None;
    eventually(what, || {
        found = find();
        found.is_some()
    })
    .await;
    found.expect("checked")
}
