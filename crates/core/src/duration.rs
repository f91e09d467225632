//! Durations as Kubernetes and Go write them (`30s`, `1m30s`, `500ms`, `1.5s`, `0`): the API
//! server's `?timeout=` query and every duration flag read them the same way.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use k8s_openapi::jiff::SignedDuration;

/// Parses a non-negative duration: numbers (fractions allowed) each followed by a unit, `ns`,
/// `us`, `ms`, `s`, `m` or `h`; `0` alone needs none.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err("empty duration; expected e.g. 30s, 2m, 1h30m".to_string());
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if number_len == 0 {
            return Err(format!("invalid duration {text:?}: expected a number at {rest:?} (e.g. 30s, 2m, 1h30m)"));
        }
        let value: f64 =
            rest[..number_len].parse().map_err(|_| format!("invalid duration {text:?}: {rest:?} is not a number"))?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("invalid duration {text:?}: missing unit (ms, s, m or h)")),
            other => return Err(format!("invalid duration {text:?}: unknown unit {other:?} (use ms, s, m or h)")),
        };
        rest = &rest[unit_len..];
        total += value * seconds;
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("invalid duration {text:?}: too large"))
}

/// [`parse`], as the signed duration the controller's clock arithmetic uses.
pub fn parse_signed(text: &str) -> Result<SignedDuration, String> {
    let duration = parse(text)?;
    SignedDuration::try_from(duration).map_err(|_| format!("invalid duration {text:?}: too large"))
}

/// `t + d`, saturating at the ends of time instead of panicking on absurd TTLs.
pub fn plus(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(if d.is_negative() { Timestamp::MIN } else { Timestamp::MAX })
}

/// A duration as `1h2m3s` (Go's notation, as the flags take it).
pub(crate) fn fmt_duration(d: SignedDuration) -> String {
    let secs = d.as_secs();
    let (sign, secs) = if secs < 0 { ("-", -secs) } else { ("", secs) };
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{sign}{s}s"),
        (0, _) => format!("{sign}{m}m{s}s"),
        _ => format!("{sign}{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases: &[(&str, Result<u64, &str>)] = &[
            ("10s", Ok(10_000)),
            ("2m", Ok(120_000)),
            ("1m30s", Ok(90_000)),
            ("1h30m", Ok(5_400_000)),
            ("500ms", Ok(500)),
            ("1.5s", Ok(1_500)),
            ("0", Ok(0)),
            ("0s", Ok(0)),
            ("", Err("empty duration")),
            ("5", Err("missing unit")),
            ("10x", Err("unknown unit")),
            ("5d", Err("unknown unit")),
            ("s", Err("expected a number")),
            ("m5", Err("expected a number")),
            ("-1s", Err("expected a number")),
            ("1.2.3s", Err("is not a number")),
        ];
        for (text, want) in cases {
            let got = parse(text).map(|d| d.as_millis() as u64);
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, *w, "{text}"),
                (Err(g), Err(w)) => assert!(g.contains(w), "{text}: {g}"),
                (g, w) => panic!("{text}: got {g:?}, want {w:?}"),
            }
        }
        assert_eq!(parse_signed("2m"), Ok(SignedDuration::from_secs(120)));
    }
}
