//! The denial's hand-formatted log line against what tracing-subscriber writes for the same
//! event, in both formats: the same bytes after the timestamp, and a timestamp of the same shape
//! and instant.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use tracing_subscriber::EnvFilter;
use trainguard::config::LogFormat;
use trainguard::log_line::{Denial, write_timestamp};

const TARGET: &str = "trainguard::server::routes";

/// A `MakeWriter` that keeps what it is given.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// The line tracing-subscriber writes for the event, and the time around it.
fn through_tracing(format: LogFormat, line: &Denial<'_>) -> (String, SystemTime, SystemTime) {
    let captured = Captured::default();
    let subscriber = trainguard::telemetry::subscriber(format, EnvFilter::new("info"), captured.clone(), false);
    let before = SystemTime::now();
    tracing::subscriber::with_default(subscriber, || trainguard::server::routes::log_denial_event(line));
    let after = SystemTime::now();
    let bytes = captured.0.lock().unwrap().clone();
    (String::from_utf8(bytes).expect("UTF-8"), before, after)
}

fn by_hand(format: LogFormat, line: &Denial<'_>, now: SystemTime) -> String {
    let mut out = Vec::new();
    line.write(format, TARGET, now, &mut out);
    String::from_utf8(out).expect("UTF-8")
}

/// Splits a line into its timestamp and the rest, with the timestamp's place kept.
fn split_timestamp(format: LogFormat, line: &str) -> (String, String) {
    let start = match format {
        LogFormat::Text => 0,
        LogFormat::Json => line.find(r#"{"timestamp":""#).expect("a timestamp key first") + 14,
    };
    let end = start + line[start..].find('Z').expect("a UTC timestamp") + 1;
    (line[start..end].to_string(), format!("{}<ts>{}", &line[..start], &line[end..]))
}

fn denial<'a>(detail: &'a str, uid: &'a str, name: &'a str, dry_run: bool) -> Denial<'a> {
    Denial {
        webhook: "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        uid,
        operation: "UPDATE",
        namespace: "team-a",
        name,
        rule: "U2",
        dry_run,
        detail,
    }
}

#[test]
fn the_line_is_what_tracing_subscriber_writes() {
    let u2 = "spec.podTemplateOverrides: Forbidden: can only be changed while the TrainJob is suspended; \
              suspend it first (kubectl patch trainjob llama --type=merge -p '{\"spec\":{\"suspend\":true}}')";
    let cases: [(&str, Denial<'_>); 7] = [
        ("a U2 denial", denial(u2, "2b9a1c5e-7d0f-4c1a-9e55-3f7d8a4b1c20", "llama", false)),
        ("a dry run", denial("denied", "uid", "llama", true)),
        ("quotes and backslashes", denial(r#"a "quoted" \ value"#, r#"u"id"#, r"na\me", false)),
        ("control characters", denial("line one\nline two\ttab\r\u{1}\u{7f}", "uid", "llama", false)),
        ("non-ASCII", denial("zürich – 東京 🚀 \u{200b}", "uid", "ñame", false)),
        ("empty values", denial("", "", "", false)),
        ("two rules", Denial { rule: "U2,M1", namespace: "", ..denial("two", "uid", "n", false) }),
    ];
    for format in [LogFormat::Text, LogFormat::Json] {
        for (name, line) in &cases {
            let (theirs, before, after) = through_tracing(format, line);
            let ours = by_hand(format, line, after);
            let (their_ts, their_rest) = split_timestamp(format, &theirs);
            let (our_ts, our_rest) = split_timestamp(format, &ours);
            assert_eq!(our_rest, their_rest, "{format:?}, {name}");
            assert_eq!(our_ts.len(), their_ts.len(), "{format:?}, {name}: {our_ts} vs {their_ts}");
            let theirs_at: Timestamp = their_ts.parse().expect("tracing's timestamp parses");
            let ours_at: Timestamp = our_ts.parse().expect("our timestamp parses");
            let since = |t: SystemTime| Timestamp::try_from(t).unwrap();
            assert!(since(before) <= theirs_at && theirs_at <= since(after), "{format:?}, {name}");
            let after_micros = after.duration_since(UNIX_EPOCH).unwrap().as_micros() as i64;
            assert_eq!(ours_at.as_microsecond(), after_micros, "{format:?}, {name}: our timestamp is the time given");
            if format == LogFormat::Json {
                let v: serde_json::Value = serde_json::from_str(&ours).expect("one JSON object");
                assert_eq!(v["detail"], line.detail, "{name}");
            }
        }
    }
}

#[test]
fn timestamps_of_known_instants() {
    let cases: [(u64, u32, &str); 6] = [
        (0, 0, "1970-01-01T00:00:00.000000Z"),
        (951_782_400, 999, "2000-02-29T00:00:00.000000Z"),
        (951_868_799, 123_456_789, "2000-02-29T23:59:59.123456Z"),
        (1_795_597_200, 500_000, "2026-11-25T09:00:00.000500Z"),
        (4_107_542_399, 999_999_999, "2100-02-28T23:59:59.999999Z"),
        (253_402_300_799, 0, "9999-12-31T23:59:59.000000Z"),
    ];
    for (secs, nanos, want) in cases {
        let mut out = Vec::new();
        write_timestamp(UNIX_EPOCH + Duration::new(secs, nanos), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), want, "{secs}.{nanos:09}");
    }
}

proptest! {
    #[test]
    fn timestamps_agree_with_jiff(secs in 0u64..253_402_300_800, micros in 0u32..1_000_000) {
        let mut out = Vec::new();
        write_timestamp(UNIX_EPOCH + Duration::new(secs, micros * 1000), &mut out);
        let want = Timestamp::new(secs as i64, (micros * 1000) as i32).unwrap();
        prop_assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{}.{:06}Z", want.strftime("%Y-%m-%dT%H:%M:%S"), micros)
        );
    }
}
