//! Prometheus metrics of the webhook, named like controller-runtime's so existing dashboards
//! work. Label values are `&'static str`, so recording a request allocates nothing.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::cluster::metrics::CacheMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Numbers each [`WebhookMetrics`] so that [`WebhookMetrics::count_decision`] tells them apart.
static NEXT_INSTANCE: AtomicUsize = AtomicUsize::new(0);

/// Label sets whose every value is a `&'static str` (so that recording allocates nothing), each a
/// struct with these derives.
macro_rules! label_sets {
    ($($vis:vis struct $name:ident { $($field_vis:vis $field:ident),+ })+) => {$(
        #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
        $vis struct $name {
            $($field_vis $field: &'static str),+
        }
    )+};
}

label_sets! {
    pub struct WebhookLabels { pub webhook }
    pub struct WebhookCodeLabels { pub webhook, pub code }
    pub struct DecisionLabels { pub webhook, pub operation, pub allowed, pub rule }
    pub(crate) struct ListenerLabels { pub(crate) listener }
    pub(crate) struct RefusedLabels { pub(crate) listener, pub reason }
    pub struct ReasonLabels { pub reason }
    pub struct ResultLabels { pub result }
}

/// `trainguard_log_lines_dropped_total`: log lines the log writer dropped because its buffer was
/// full (read from the writer's own counter at scrape time).
#[derive(Debug)]
pub(crate) struct LogLinesDropped(pub crate::logging::writer::DroppedLines);

impl prometheus_client::encoding::EncodeMetric for LogLinesDropped {
    fn encode(&self, encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        prometheus_client::metrics::counter::ConstCounter::new(self.0.get()).encode(encoder)
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Counter
    }
}

impl LogLinesDropped {
    pub(crate) fn register(self, registry: &mut Registry) {
        registry.register(
            "trainguard_log_lines_dropped",
            "Log lines dropped because the log writer's queue was full (logging never blocks a request)",
            self,
        );
    }
}

/// controller-runtime's webhook latency buckets, with sub-millisecond ones in front: trainguard
/// answers in microseconds, and a dashboard built for controller-runtime still reads the rest.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
    0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The series of one webhook that every request touches, looked up once: each is a handle on
/// the same value the family exports.
#[derive(Debug, Clone)]
pub(crate) struct WebhookSeries {
    pub in_flight: Gauge,
    pub latency: Histogram,
    /// `requests_total{code="200"}`; other codes go through the family.
    pub(crate) ok: Counter,
}

#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    pub requests: Family<WebhookCodeLabels, Counter>,
    pub latency: Family<WebhookLabels, Histogram>,
    pub in_flight: Family<WebhookLabels, Gauge>,
    pub decisions: Family<DecisionLabels, Counter>,
    /// The watch-fed caches' metrics, registered with these.
    pub cache: CacheMetrics,
    pub(crate) cert_expiry: Gauge<f64, AtomicU64>,
    pub cert_reloads: Family<ResultLabels, Counter>,
    /// Certificate pairs a reload refused, by why (`expired`, `not_yet_valid`, `key_mismatch`,
    /// `unparsable`, `unreadable`).
    pub cert_reload_refusals: Family<ReasonLabels, Counter>,
    /// Connections closed at once or cut by a deadline, by listener and reason.
    pub(crate) connections_refused: Family<RefusedLabels, Counter>,
    /// Open connections per listener (`webhook`, `admin`), to compare with their caps.
    pub(crate) connections: Family<ListenerLabels, Gauge>,
    /// Bytes held by unfinished request bodies (capped by --max-inflight-body-bytes).
    pub(crate) inflight_body_bytes: Gauge,
    /// Tells apart the metric sets of several servers in one process ([`Self::count_decision`]).
    instance: usize,
}

impl WebhookMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = WebhookMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS.iter().copied())),
            in_flight: Family::default(),
            decisions: Family::default(),
            cache: CacheMetrics::register(registry),
            cert_expiry: Gauge::default(),
            cert_reloads: Family::default(),
            cert_reload_refusals: Family::default(),
            connections_refused: Family::default(),
            connections: Family::default(),
            inflight_body_bytes: Gauge::default(),
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        };
        registry.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code",
            m.requests.clone(),
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            m.latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served",
            m.in_flight.clone(),
        );
        registry.register(
            "trainguard_admission_decisions",
            "Admission verdicts by webhook, operation, outcome and deciding rule",
            m.decisions.clone(),
        );
        registry.register(
            "trainguard_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate in use, as a Unix timestamp",
            m.cert_expiry.clone(),
        );
        registry.register(
            "trainguard_certificate_reloads",
            "Serving certificate reload attempts by result",
            m.cert_reloads.clone(),
        );
        registry.register(
            "trainguard_certificate_reload_refusals",
            "Serving certificate pairs a reload refused (the previous pair stays in use), by reason",
            m.cert_reload_refusals.clone(),
        );
        registry.register(
            "trainguard_connections_refused",
            "Connections closed without being served, by listener and reason (per_ip_cap, handshake_timeout, \
             header_timeout)",
            m.connections_refused.clone(),
        );
        registry.register(
            "trainguard_open_connections",
            "Open connections per listener (capped by --max-connections and --max-admin-connections)",
            m.connections.clone(),
        );
        registry.register(
            "trainguard_inflight_body_bytes",
            "Bytes held by unfinished request bodies (capped by --max-inflight-body-bytes)",
            m.inflight_body_bytes.clone(),
        );
        m
    }

    /// The open-connections gauge of one listener.
    pub fn open_connections(&self, listener: &'static str) -> Gauge {
        self.connections.get_or_create(&ListenerLabels { listener }).clone()
    }

    /// `trainguard_connections_refused_total{listener, reason}` + 1.
    pub fn refuse_connection(&self, listener: &'static str, reason: &'static str) {
        self.connections_refused.get_or_create(&RefusedLabels { listener, reason }).inc();
    }

    /// `trainguard_admission_decisions_total{…}` + 1. Resolving a label set in the family hashes
    /// four strings under a lock; the handles already resolved are kept per thread, found by the
    /// addresses of their `&'static str` labels (a miss only costs one more lookup).
    pub(crate) fn count_decision(&self, labels: DecisionLabels) {
        // Keyed by registry instance too: tests run several servers in one process.
        type Resolved = Vec<(usize, DecisionLabels, Counter)>;
        thread_local! {
            static RESOLVED: std::cell::RefCell<Resolved> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let same = |a: &DecisionLabels, b: &DecisionLabels| {
            std::ptr::eq(a.webhook, b.webhook)
                && std::ptr::eq(a.operation, b.operation)
                && std::ptr::eq(a.allowed, b.allowed)
                && std::ptr::eq(a.rule, b.rule)
        };
        RESOLVED.with_borrow_mut(|resolved| {
            if let Some((_, _, counter)) = resolved.iter().find(|(i, l, _)| *i == self.instance && same(l, &labels)) {
                counter.inc();
                return;
            }
            let counter = self.decisions.get_or_create(&labels).clone();
            counter.inc();
            // Label values come from a fixed set, but bound the cache all the same.
            if resolved.len() < 256 {
                resolved.push((self.instance, labels, counter));
            }
        });
    }

    pub(crate) fn series(&self, webhook: &'static str) -> WebhookSeries {
        WebhookSeries {
            in_flight: self.in_flight.get_or_create(&WebhookLabels { webhook }).clone(),
            latency: self.latency.get_or_create(&WebhookLabels { webhook }).clone(),
            ok: self.requests.get_or_create(&WebhookCodeLabels { webhook, code: "200" }).clone(),
        }
    }
}

/// HTTP status code as a static label value.
pub(crate) fn code_label(code: u16) -> &'static str {
    match code {
        200 => "200",
        400 => "400",
        404 => "404",
        405 => "405",
        413 => "413",
        415 => "415",
        429 => "429",
        500 => "500",
        503 => "503",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn exported(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).expect("encodes");
        text
    }

    #[test]
    fn dropped_log_lines_are_exported_as_a_counter() {
        use std::io::Write;
        /// A log sink that is slower than the lines coming in.
        struct Slow;
        impl Write for Slow {
            #[allow(clippy::disallowed_methods, reason = "a slow writer is what is tested")]
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                std::thread::sleep(std::time::Duration::from_millis(20));
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (writer, _guard) = crate::logging::writer::spawn(Slow, 16).unwrap();
        let mut registry = Registry::default();
        LogLinesDropped(writer.dropped()).register(&mut registry);
        assert!(exported(&registry).contains("trainguard_log_lines_dropped_total 0"), "{}", exported(&registry));
        let started = std::time::Instant::now();
        for _ in 0..50 {
            (&writer).write_all(b"denied\n").unwrap();
        }
        assert!(started.elapsed() < std::time::Duration::from_millis(500), "the writer blocked the caller");
        let dropped = writer.dropped().get();
        assert!(dropped >= 40, "{dropped}");
        let text = exported(&registry);
        assert!(text.contains("# TYPE trainguard_log_lines_dropped counter"), "{text}");
        assert!(text.contains(&format!("trainguard_log_lines_dropped_total {dropped}")), "{text}");
    }

    #[test]
    fn decisions_count_into_their_own_registry() {
        // Two servers in one process and thread: the per-thread handles must not mix them up.
        let (mut first, mut second) = (Registry::default(), Registry::default());
        let (a, b) = (WebhookMetrics::register(&mut first), WebhookMetrics::register(&mut second));
        let labels = |rule| DecisionLabels { webhook: "/validate", operation: "UPDATE", allowed: "true", rule };
        for _ in 0..3 {
            a.count_decision(labels("U1"));
        }
        b.count_decision(labels("U1"));
        b.count_decision(labels("U3"));
        let line = |rule, n| {
            format!(
                "trainguard_admission_decisions_total{{webhook=\"/validate\",operation=\"UPDATE\",allowed=\"true\",rule=\"{rule}\"}} {n}"
            )
        };
        let (first, second) = (exported(&first), exported(&second));
        assert!(first.contains(&line("U1", 3)), "{first}");
        assert!(!first.contains("rule=\"U3\""), "{first}");
        assert!(second.contains(&line("U1", 1)) && second.contains(&line("U3", 1)), "{second}");
    }
}
