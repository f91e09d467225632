//! Fair connection slots: when the webhook port is at `--max-connections`, the connection idle the
//! longest makes room for a new one, if it has been idle at least [`EVICT_FLOOR`]. Idle means
//! between requests (after at least one, with no byte of the next one read): a connection is
//! never closed under a request, and a client that reuses it at once is not cut. Go's HTTP client
//! does not retry a POST written onto a reused connection the server then closes, so the floor
//! keeps eviction away from connections in active use.
//!
//! Without it, addresses that each open their share of slots and leave them idle hold the port
//! for `--idle-timeout` (120 s, above client-go's 90 s so that the client closes first).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A connection idle at least this long may be closed to make room at the connection cap.
pub const EVICT_FLOOR: Duration = Duration::from_secs(10);

/// The idle connections of one listener.
#[derive(Debug)]
pub(crate) struct IdleConns {
    floor: Duration,
    next: AtomicU64,
    idle: Mutex<HashMap<u64, (Instant, Arc<Notify>)>>,
}

impl IdleConns {
    pub(crate) fn new(floor: Duration) -> Arc<Self> {
        Arc::new(IdleConns { floor, next: AtomicU64::new(0), idle: Mutex::new(HashMap::new()) })
    }

    /// A handle for one new connection (not idle yet).
    pub(crate) fn register(self: &Arc<Self>) -> IdleHandle {
        IdleHandle {
            conns: self.clone(),
            id: self.next.fetch_add(1, Ordering::Relaxed),
            evict: Arc::new(Notify::new()),
        }
    }

    /// Asks the connection idle the longest, if idle at least the floor, to close. Whether one
    /// was asked.
    pub(crate) fn evict_one(&self) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let oldest = idle
            .iter()
            .filter(|(_, (since, _))| now.saturating_duration_since(*since) >= self.floor)
            .min_by_key(|(_, (since, _))| *since)
            .map(|(id, _)| *id);
        match oldest.and_then(|id| idle.remove(&id)) {
            Some((_, evict)) => {
                evict.notify_one();
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// One connection's entry: idle between requests, busy otherwise; removed when dropped.
#[derive(Debug)]
pub(crate) struct IdleHandle {
    conns: Arc<IdleConns>,
    id: u64,
    evict: Arc<Notify>,
}

impl IdleHandle {
    /// The connection finished its requests and waits for the next one.
    pub(crate) fn idle(&self) {
        let mut idle = self.conns.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.insert(self.id, (Instant::now(), self.evict.clone()));
    }

    /// A request (or its first byte) arrived.
    pub(crate) fn busy(&self) {
        let mut idle = self.conns.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.remove(&self.id);
    }

    /// Resolves when [`IdleConns::evict_one`] chose this connection.
    pub(crate) async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for IdleHandle {
    fn drop(&mut self) {
        self.busy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Only tokio's clock: paused time.
    #[tokio::test(start_paused = true)]
    async fn the_longest_idle_past_the_floor_is_asked_to_close() {
        let conns = IdleConns::new(Duration::from_secs(10));
        let (a, b, c) = (conns.register(), conns.register(), conns.register());
        a.idle();
        tokio::time::advance(Duration::from_secs(5)).await;
        b.idle();
        c.idle();
        c.busy();
        assert!(!conns.evict_one(), "none idle for 10 s yet");
        tokio::time::advance(Duration::from_secs(6)).await;
        assert!(conns.evict_one(), "a: idle 11 s");
        tokio::time::timeout(Duration::from_millis(1), a.evicted()).await.expect("a was asked");
        assert!(!conns.evict_one(), "b: idle 6 s; c: busy");
        tokio::time::advance(Duration::from_secs(4)).await;
        assert!(conns.evict_one(), "b: idle 10 s");
        assert!(tokio::time::timeout(Duration::from_millis(1), c.evicted()).await.is_err(), "c is busy");
        b.idle();
        drop(b);
        assert_eq!(conns.idle_count(), 0, "a dropped connection leaves");
    }
}
