//! Request limits: the `?timeout=` deadline the API server sends, and its margin.

use std::time::Duration;

/// The API server's default webhook timeout, used when the query carries none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest timeout the API server allows for a webhook.
const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads `timeout=<Go duration>` from a query string (`?timeout=10s`).
pub fn parse_timeout_query(query: Option<&str>) -> Option<Duration> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "timeout")
        .and_then(|(_, v)| parse_go_duration(v))
        .map(|d| d.min(MAX_TIMEOUT))
}

/// When the handler must have answered: a little before the API server gives up, so that it
/// gets our retryable denial instead of a timeout.
pub fn handler_deadline(timeout: Duration) -> Duration {
    let margin = (timeout / 10).min(Duration::from_millis(500));
    timeout - margin
}

/// Parses Go's `time.Duration` text (`10s`, `1m30s`, `500ms`, `1.5s`). Negative or empty: None.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases: &[(&str, Option<Duration>)] = &[
            ("10s", Some(Duration::from_secs(10))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("500ms", Some(Duration::from_millis(500))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("0", Some(Duration::ZERO)),
            ("", None),
            ("10", None),
            ("s", None),
            ("-1s", None),
            ("10x", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), *want, "{text}");
        }
    }

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
