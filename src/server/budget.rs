//! The bytes that unfinished request bodies may hold, all connections together
//! (`--max-inflight-body-bytes`). A body takes budget for each chunk as it arrives and gives it
//! all back when its request is answered. When the budget is spent, the handler stops reading:
//! hyper stops reading the socket and the client's TCP window fills (back-pressure). A body that
//! cannot get budget within [`BUDGET_WAIT`] gets a retryable 429.
//!
//! A quarter of the budget is a reserve for bodies that declare at most [`SMALL_BODY`] bytes (every
//! real review: ~5 KB typically, ~150 KB for big objects). They draw on the reserve first and on the
//! shared part only when the reserve is spent; bigger or undeclared bodies draw on the shared part
//! only. So uploads of megabytes, hostile or broken, can hold at most three quarters of the budget,
//! and a normal review never waits behind them.
//!
//! No single connection may hold more than [`BodyBudget::connection_share`] (an eighth of the
//! budget, at least the largest body): an HTTP/2 connection multiplexing many stalled bodies, small
//! ones included, cannot take the reserve by itself. A body that would push its connection past
//! the share is answered 429 at once (HTTP/1.1 connections carry one body at a time, so only
//! HTTP/2 can reach it).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Semaphore, TryAcquireError};
use tokio::time::Instant;

/// Bodies up to this declared size draw on the reserve.
pub(crate) const SMALL_BODY: u64 = 256 * 1024;
/// The longest a chunk waits for budget before the request is answered 429 (less if the
/// request's own deadline comes first).
pub(crate) const BUDGET_WAIT: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BudgetError {
    #[error(
        "--max-inflight-body-bytes ({budget}) must be at least 4/3 of --max-body-bytes ({max_body}), so that the \
         largest body fits in the part of the budget shared by all bodies"
    )]
    TooSmall { budget: usize, max_body: usize },
}

/// Where a body's budget comes from, decided by its declared length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyClass {
    /// Declared length ≤ [`SMALL_BODY`]: reserve first, then shared.
    Small,
    /// Bigger, or no declared length: shared only.
    Large,
}

impl BodyClass {
    pub(crate) fn of(declared: Option<u64>) -> Self {
        match declared {
            Some(n) if n <= SMALL_BODY => BodyClass::Small,
            _ => BodyClass::Large,
        }
    }
}

/// The budget: two semaphores of bytes.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    reserve: Semaphore,
    shared: Semaphore,
    total: usize,
    max_body: usize,
    /// `trainguard_inflight_body_bytes`: bytes held, exported.
    gauge: Gauge,
}

impl BodyBudget {
    /// `total` bytes, a quarter of them reserved for small bodies. The shared part must hold the
    /// largest body, or such a body could never be read.
    pub(crate) fn new(total: usize, max_body: usize, gauge: Gauge) -> Result<Self, BudgetError> {
        let reserve = total / 4;
        let shared = total - reserve;
        if shared < max_body {
            return Err(BudgetError::TooSmall { budget: total, max_body });
        }
        Ok(BodyBudget { reserve: Semaphore::new(reserve), shared: Semaphore::new(shared), total, max_body, gauge })
    }

    /// Bytes currently held by unfinished bodies.
    #[cfg(test)]
    fn in_use(&self) -> usize {
        self.total - self.reserve.available_permits() - self.shared.available_permits()
    }

    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// The most one connection's bodies may hold together: an eighth of the budget, and at least
    /// the largest body (which must stay readable).
    pub(crate) fn connection_share(&self) -> usize {
        (self.total / 8).max(self.max_body)
    }
}

/// What the bodies of one connection hold together, against [`BodyBudget::connection_share`].
#[derive(Debug)]
pub(crate) struct ConnShare {
    held: AtomicUsize,
    limit: usize,
}

impl ConnShare {
    pub(crate) fn new(limit: usize) -> Self {
        ConnShare { held: AtomicUsize::new(0), limit }
    }

    /// Bytes the connection's bodies hold.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn try_take(&self, n: usize) -> bool {
        let before = self.held.fetch_add(n, Ordering::Relaxed);
        if before + n > self.limit {
            self.held.fetch_sub(n, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }
}

/// The budget one body holds; given back when dropped.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    budget: &'a BodyBudget,
    share: Option<&'a ConnShare>,
    class: BodyClass,
    reserve: usize,
    shared: usize,
}

/// The budget was not available before the wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exhausted;

impl<'a> Held<'a> {
    #[cfg(test)]
    fn new(budget: &'a BodyBudget, class: BodyClass) -> Self {
        Held { budget, share: None, class, reserve: 0, shared: 0 }
    }

    /// A body of a connection whose bodies together may hold `share.limit` at most.
    pub(crate) fn with_share(budget: &'a BodyBudget, class: BodyClass, share: &'a ConnShare) -> Self {
        Held { budget, share: Some(share), class, reserve: 0, shared: 0 }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.reserve + self.shared
    }

    /// Takes `n` more bytes, waiting [`BUDGET_WAIT`] at most and never past `deadline`. The
    /// first attempt reads no clock and arms no timer (the common case: budget is there).
    pub(crate) async fn take(&mut self, n: usize, deadline: Instant) -> Result<(), Exhausted> {
        if n == 0 {
            return Ok(());
        }
        if let Some(share) = self.share
            && !share.try_take(n)
        {
            return Err(Exhausted);
        }
        let taken = self.take_inner(n, deadline).await;
        match (&taken, self.share) {
            (Ok(()), _) => {
                self.budget.gauge.inc_by(n as i64);
            }
            (Err(_), Some(share)) => share.give_back(n),
            (Err(_), None) => {}
        }
        taken
    }

    async fn take_inner(&mut self, n: usize, deadline: Instant) -> Result<(), Exhausted> {
        // A chunk never exceeds the body limit, which fits in the shared part (checked in `new`);
        // the cast cannot truncate below that.
        let permits = u32::try_from(n).map_err(|_| Exhausted)?;
        let budget = self.budget;
        if self.class == BodyClass::Small && take_now(&budget.reserve, permits)? {
            self.reserve += n;
            return Ok(());
        }
        if take_now(&budget.shared, permits)? {
            self.shared += n;
            return Ok(());
        }
        // Waiting: whichever part frees enough first. A cancelled acquire gives back what it had.
        let wait = async {
            if self.class == BodyClass::Small {
                tokio::select! {
                    p = budget.reserve.acquire_many(permits) => p.map(|p| { p.forget(); (true, n) }),
                    p = budget.shared.acquire_many(permits) => p.map(|p| { p.forget(); (false, n) }),
                }
            } else {
                budget.shared.acquire_many(permits).await.map(|p| {
                    p.forget();
                    (false, n)
                })
            }
        };
        let until = deadline.min(Instant::now() + BUDGET_WAIT);
        match tokio::time::timeout_at(until, wait).await {
            Ok(Ok((true, n))) => {
                self.reserve += n;
                Ok(())
            }
            Ok(Ok((false, n))) => {
                self.shared += n;
                Ok(())
            }
            Ok(Err(_)) | Err(_) => Err(Exhausted),
        }
    }
}

impl Held<'_> {
    /// Keeps `len` of the bytes held (at most all of them) for the answer until it is written,
    /// and gives the rest back now: an answer a client does not read counts against the budget
    /// like the body it answers.
    pub(crate) fn keep_for_answer(
        mut self,
        len: usize,
        budget: Arc<BodyBudget>,
        share: Option<Arc<ConnShare>>,
    ) -> AnswerHeld {
        let keep = len.min(self.bytes());
        let reserve = keep.min(self.reserve);
        let shared = keep - reserve;
        // What stays in `self` is given back when it drops, below.
        self.reserve -= reserve;
        self.shared -= shared;
        drop(self);
        AnswerHeld { budget, share, reserve, shared }
    }
}

/// Budget an answer holds until it is written (then dropped by hyper with its bytes).
#[derive(Debug)]
pub(crate) struct AnswerHeld {
    budget: Arc<BodyBudget>,
    share: Option<Arc<ConnShare>>,
    reserve: usize,
    shared: usize,
}

impl AnswerHeld {
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.reserve + self.shared
    }
}

impl Drop for AnswerHeld {
    fn drop(&mut self) {
        let bytes = self.reserve + self.shared;
        if bytes > 0 {
            self.budget.gauge.dec_by(bytes as i64);
            if let Some(share) = &self.share {
                share.give_back(bytes);
            }
        }
        if self.reserve > 0 {
            self.budget.reserve.add_permits(self.reserve);
        }
        if self.shared > 0 {
            self.budget.shared.add_permits(self.shared);
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.bytes() > 0 {
            self.budget.gauge.dec_by(self.bytes() as i64);
            if let Some(share) = self.share {
                share.give_back(self.bytes());
            }
        }
        if self.reserve > 0 {
            self.budget.reserve.add_permits(self.reserve);
        }
        if self.shared > 0 {
            self.budget.shared.add_permits(self.shared);
        }
    }
}

/// Takes `permits` from one part of the budget if it has them free now (false when it has not).
fn take_now(part: &Semaphore, permits: u32) -> Result<bool, Exhausted> {
    match part.try_acquire_many(permits) {
        Ok(p) => {
            p.forget();
            Ok(true)
        }
        Err(TryAcquireError::Closed) => Err(Exhausted),
        Err(TryAcquireError::NoPermits) => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The budget's only clock is tokio's (its waits are timers and semaphores), so the tests run
    // on paused time: a wait that should time out does so at once, and one that should not is
    // not cut short by a slow machine.

    const KIB: usize = 1024;

    /// 400 KiB: 100 KiB reserved for small bodies, 300 KiB shared.
    fn budget_400k() -> BodyBudget {
        BodyBudget::new(400 * KIB, 100 * KIB, Gauge::default()).unwrap()
    }

    #[test]
    fn classes() {
        let cases = [
            (None, BodyClass::Large),
            (Some(0), BodyClass::Small),
            (Some(5_000), BodyClass::Small),
            (Some(SMALL_BODY), BodyClass::Small),
            (Some(SMALL_BODY + 1), BodyClass::Large),
            (Some(7 << 20), BodyClass::Large),
        ];
        for (declared, class) in cases {
            assert_eq!(BodyClass::of(declared), class, "{declared:?}");
        }
    }

    #[test]
    fn the_shared_part_must_hold_the_largest_body() {
        assert!(BodyBudget::new(64 << 20, 7 << 20, Gauge::default()).is_ok());
        assert!(BodyBudget::new(8 << 20, 6 << 20, Gauge::default()).is_ok());
        assert_eq!(
            BodyBudget::new(8 << 20, 7 << 20, Gauge::default()).unwrap_err(),
            BudgetError::TooSmall { budget: 8 << 20, max_body: 7 << 20 }
        );
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(50)
    }

    /// A body of `class` that took `n` bytes from `budget`; `what` says where they came from.
    async fn holding<'a>(budget: &'a BodyBudget, class: BodyClass, n: usize, what: &str) -> Held<'a> {
        let mut held = Held::new(budget, class);
        held.take(n, soon()).await.unwrap_or_else(|e| panic!("{what}: {e:?}"));
        held
    }

    #[tokio::test(start_paused = true)]
    async fn large_bodies_cannot_touch_the_reserve_and_small_ones_still_pass() {
        let budget = budget_400k(); // reserve 100 KiB, shared 300 KiB
        let mut big = holding(&budget, BodyClass::Large, 300 * KIB, "the shared part").await;
        assert_eq!(big.take(1, soon()).await, Err(Exhausted), "shared part spent; the reserve is not for it");
        let small = holding(&budget, BodyClass::Small, 5 * KIB, "a small body gets the reserve").await;
        assert_eq!(budget.in_use(), 305 * KIB);
        drop(small);
        drop(big);
        assert_eq!(budget.in_use(), 0, "everything given back");
    }

    #[tokio::test(start_paused = true)]
    async fn small_bodies_overflow_into_the_shared_part() {
        let budget = budget_400k();
        let a = holding(&budget, BodyClass::Small, 100 * KIB, "the reserve").await;
        let b = holding(&budget, BodyClass::Small, 100 * KIB, "from the shared part").await;
        assert_eq!((a.reserve, a.shared, b.reserve, b.shared), (100 * KIB, 0, 0, 100 * KIB));
    }

    #[tokio::test(start_paused = true)]
    #[allow(
        clippy::disallowed_methods,
        reason = "lets the waiter park on the budget before it is released (real tokio time)"
    )]
    async fn a_waiting_body_goes_on_when_budget_comes_back() {
        let budget = std::sync::Arc::new(budget_400k());
        let big = holding(&budget, BodyClass::Large, 300 * KIB, "the shared part").await;
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut h = Held::new(&budget, BodyClass::Large);
                h.take(10 * KIB, Instant::now() + Duration::from_secs(30)).await.map(|()| h.bytes())
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "waits while the budget is spent");
        drop(big);
        assert_eq!(waiter.await.unwrap(), Ok(10 * KIB));
        assert_eq!(budget.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn one_connection_holds_its_share_at_most() {
        let budget = BodyBudget::new(1600 * KIB, 100 * KIB, Gauge::default()).unwrap(); // share 200 KiB
        assert_eq!(budget.connection_share(), 200 * KIB);
        let share = ConnShare::new(budget.connection_share());
        let mut a = Held::with_share(&budget, BodyClass::Small, &share);
        a.take(150 * KIB, soon()).await.unwrap();
        let mut b = Held::with_share(&budget, BodyClass::Small, &share);
        assert_eq!(b.take(60 * KIB, soon()).await, Err(Exhausted), "past the connection's share");
        assert_eq!(share.held(), 150 * KIB, "a refused take holds nothing");
        let other = ConnShare::new(budget.connection_share());
        let mut c = Held::with_share(&budget, BodyClass::Small, &other);
        c.take(60 * KIB, soon()).await.expect("another connection has its own share");
        drop(a);
        assert_eq!(share.held(), 0);
        b.take(60 * KIB, soon()).await.expect("the share came back");
        assert_eq!(budget.connection_share(), 200 * KIB);
        assert_eq!(budget_400k().connection_share(), 100 * KIB);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_holds_its_bytes_until_dropped() {
        let budget = Arc::new(budget_400k());
        let share = Arc::new(ConnShare::new(budget.connection_share()));
        let cases = [("answer smaller than the body", 50 * KIB, 10 * KIB), ("answer bigger", 10 * KIB, 50 * KIB)];
        for (case, body, answer) in cases {
            let mut held = Held::with_share(&budget, BodyClass::Small, &share);
            held.take(body, soon()).await.unwrap();
            let kept = held.keep_for_answer(answer, budget.clone(), Some(share.clone()));
            assert_eq!(kept.bytes(), answer.min(body), "{case}");
            assert_eq!(
                (budget.in_use(), share.held()),
                (answer.min(body), answer.min(body)),
                "{case}: the rest came back"
            );
            drop(kept);
            assert_eq!((budget.in_use(), share.held()), (0, 0), "{case}: all back once written");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_timed_out_wait_holds_nothing() {
        let budget = budget_400k();
        let _big = holding(&budget, BodyClass::Large, 250 * KIB, "the shared part").await;
        let mut other = Held::new(&budget, BodyClass::Large);
        assert_eq!(other.take(100 * KIB, soon()).await, Err(Exhausted));
        assert_eq!(other.bytes(), 0);
        assert_eq!(budget.in_use(), 250 * KIB);
    }
}
