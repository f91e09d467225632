//! The force-delete token bucket (`--max-force-deletes-per-minute`): refilled continuously, one
//! token per force delete. The live controller starts it empty and keeps it across leadership terms
//! (a new term must not bring a fresh burst); `trainguard plan` starts it full. Pure: time is an
//! argument.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    capacity: f64,
    tokens: f64,
    at: Option<Timestamp>,
}

impl TokenBucket {
    /// A full bucket of `per_minute` tokens, refilled at `per_minute` a minute. Zero never allows.
    pub fn per_minute(per_minute: u32) -> Self {
        let capacity = f64::from(per_minute);
        TokenBucket { capacity, tokens: capacity, at: None }
    }

    /// An empty bucket that fills at `per_minute` a minute from the first time it is asked.
    pub fn empty(per_minute: u32) -> Self {
        TokenBucket { capacity: f64::from(per_minute), tokens: 0.0, at: None }
    }

    fn refill(&mut self, now: Timestamp) {
        match self.at {
            // A clock that goes back refills nothing and does not move the reference point back.
            Some(at) if now <= at => {}
            Some(at) => {
                let elapsed = now.duration_since(at).as_secs_f64();
                self.tokens = (self.tokens + elapsed * self.capacity / 60.0).min(self.capacity);
                self.at = Some(now);
            }
            None => self.at = Some(now),
        }
    }

    /// Tokens available at `now`.
    pub fn available(&mut self, now: Timestamp) -> f64 {
        self.refill(now);
        self.tokens
    }

    /// Takes one token if there is one.
    pub fn try_take(&mut self, now: Timestamp) -> bool {
        self.refill(now);
        // The epsilon absorbs float error in the refill, so a token due at t is there at t.
        if self.tokens >= 1.0 - 1e-9 {
            self.tokens = (self.tokens - 1.0).max(0.0);
            true
        } else {
            false
        }
    }

    /// Gives back a token taken for a delete that did not happen (never beyond the capacity).
    pub fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.capacity);
    }

    /// When the `n`-th waiting caller (0-based) will find a token; None if the bucket never refills.
    pub fn next_token_at(&mut self, now: Timestamp, n: u32) -> Option<Timestamp> {
        self.refill(now);
        if self.capacity <= 0.0 {
            return None;
        }
        let missing = (f64::from(n) + 1.0 - self.tokens).max(0.0);
        let wait = SignedDuration::from_secs_f64((missing * 60.0 / self.capacity - 1e-9).ceil().max(0.0));
        now.checked_add(wait).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    #[test]
    fn bursts_then_refills() {
        let mut b = TokenBucket::per_minute(3);
        assert!(b.try_take(t(0)));
        assert!(b.try_take(t(0)));
        assert!(b.try_take(t(0)));
        assert!(!b.try_take(t(0)));
        assert_eq!(b.next_token_at(t(0), 0), Some(t(20)));
        assert_eq!(b.next_token_at(t(0), 1), Some(t(40)));
        assert!(!b.try_take(t(19)));
        assert!(b.try_take(t(20)));
        // The clock going back refills nothing.
        assert!(!b.try_take(t(5)));
        // Never more than the capacity.
        assert_eq!(b.available(t(10_000)), 3.0);
    }

    #[test]
    fn empty_fills_from_the_first_use() {
        let mut b = TokenBucket::empty(3);
        assert!(!b.try_take(t(0)));
        assert_eq!(b.next_token_at(t(0), 0), Some(t(20)));
        assert!(!b.try_take(t(19)));
        assert!(b.try_take(t(20)));
        assert!(!b.try_take(t(20)));
        b.refund();
        assert!(b.try_take(t(20)));
        b.refund();
        b.refund();
        assert_eq!(b.available(t(20)), 2.0);
        b.refund();
        b.refund();
        assert_eq!(b.available(t(20)), 3.0, "never beyond the capacity");
    }

    #[test]
    fn zero_never_allows() {
        let mut b = TokenBucket::per_minute(0);
        assert!(!b.try_take(t(0)));
        assert_eq!(b.next_token_at(t(0), 0), None);
    }
}
