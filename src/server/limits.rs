//! Request limits: the `?timeout=` deadline the API server sends, and its margin.

use std::time::Duration;

/// The API server's default webhook timeout, used when the query carries none.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest timeout the API server allows for a webhook.
const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads `timeout=<Go duration>` from a query string (`?timeout=10s`).
pub(crate) fn parse_timeout_query(query: Option<&str>) -> Option<Duration> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "timeout")
        .and_then(|(_, v)| trainguard_core::duration::parse(v).ok())
        .map(|d| d.min(MAX_TIMEOUT))
}

/// When the handler must have answered: a little before the API server gives up, so that it
/// gets our retryable denial instead of a timeout.
pub(crate) fn handler_deadline(timeout: Duration) -> Duration {
    let margin = (timeout / 10).min(Duration::from_millis(500));
    timeout - margin
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_query() {
        assert_eq!(parse_timeout_query(Some("timeout=5s")), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout_query(Some("a=b&timeout=2s")), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_timeout_query(Some("timeout=5m")),
            Some(Duration::from_secs(30)),
            "capped at the API server's max"
        );
        assert_eq!(parse_timeout_query(Some("timeout=bogus")), None);
        assert_eq!(parse_timeout_query(None), None);
    }

    #[test]
    fn deadline_leaves_a_margin() {
        assert_eq!(handler_deadline(Duration::from_secs(10)), Duration::from_millis(9500));
        assert_eq!(handler_deadline(Duration::from_secs(1)), Duration::from_millis(900));
    }
}
