//! The HTTP side of admission: paths, methods, content type, body limit and deadline around the
//! pure [`admission::review`]. Every protocol failure gets a JSON `Status` and a log line.

use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body::Body as HttpBody;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::admin::Readiness;
use super::body::{Response, ResponseBody};
use super::budget::{BodyBudget, BodyClass, ConnShare, Held};
use super::conn::ConnService;
use super::limits::{DEFAULT_TIMEOUT, handler_deadline, parse_timeout_query};
use crate::cluster::ClusterView;
use crate::server::metrics::{DecisionLabels, WebhookCodeLabels, WebhookMetrics, WebhookSeries, code_label};
use trainguard_core::admission::{self, Decision, Endpoint, ErrorType, FieldError, ProtocolError, Rule, RulesConfig};

/// What every admission request needs; cloned per request (one Arc).
#[derive(Clone)]
pub(crate) struct AppState(Arc<Inner>);

struct Inner {
    rules: RulesConfig,
    cluster: Arc<dyn ClusterView>,
    metrics: WebhookMetrics,
    validate_series: WebhookSeries,
    mutate_series: WebhookSeries,
    max_body_bytes: usize,
    body_read_timeout: Duration,
    budget: Arc<BodyBudget>,
}

impl AppState {
    pub(crate) fn new(
        rules: RulesConfig,
        cluster: Arc<dyn ClusterView>,
        metrics: WebhookMetrics,
        max_body_bytes: usize,
        body_read_timeout: Duration,
        budget: Arc<BodyBudget>,
    ) -> Self {
        let validate_series = metrics.series(Endpoint::Validate.label());
        let mutate_series = metrics.series(Endpoint::Mutate.label());
        AppState(Arc::new(Inner {
            rules,
            cluster,
            metrics,
            validate_series,
            mutate_series,
            max_body_bytes,
            body_read_timeout,
            budget,
        }))
    }
}

/// The webhook's service for one connection, whose bodies together hold `share` at most (see
/// [`super::budget`]): the two admission POSTs go to [`admit`]; any other path is a JSON 404 and
/// any other method on an admission path a JSON 405. `service_fn` keeps the request's future
/// unboxed inside hyper's connection.
///
/// Once `readiness` is shutting down (the drain delay), every HTTP/1.x answer says `Connection:
/// close`, so the client closes each connection after the answer it is reading. Closed by the
/// server at the drain's end instead, a kept-alive connection the client is just reusing fails
/// the request it is writing, and the API server does not retry a webhook POST.
pub(crate) fn connection_service(
    state: AppState,
    share: Arc<ConnShare>,
    readiness: Arc<Readiness>,
) -> impl ConnService<ResponseBody> {
    hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let endpoint = [Endpoint::Validate, Endpoint::Mutate].into_iter().find(|e| e.path() == req.uri().path());
        let admitted = match endpoint {
            Some(endpoint) if req.method() == Method::POST => Ok((state.clone(), endpoint, share.clone())),
            Some(_) => Err(method_not_allowed(&req)),
            None => Err(not_found(&req)),
        };
        let http1 = req.version() <= http::Version::HTTP_11;
        let readiness = readiness.clone();
        async move {
            let mut response = match admitted {
                Ok((state, endpoint, share)) => admit(&state, endpoint, req, &share).await,
                Err(refused) => refused,
            };
            if http1 && readiness.is_shutting_down() {
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        }
    })
}

/// Decrements the in-flight gauge however the handler ends.
struct InFlight<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

async fn admit<B>(state: &AppState, endpoint: Endpoint, req: http::Request<B>, share: &Arc<ConnShare>) -> Response
where
    B: HttpBody<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let start = Instant::now();
    let inner = &state.0;
    let series = match endpoint {
        Endpoint::Validate => &inner.validate_series,
        Endpoint::Mutate => &inner.mutate_series,
    };
    series.in_flight.inc();
    let _in_flight = InFlight(&series.in_flight);

    let response = admit_inner(state, endpoint, req, start, share).await;

    match response.status().as_u16() {
        200 => series.ok.inc(),
        code => inner
            .metrics
            .requests
            .get_or_create(&WebhookCodeLabels { webhook: endpoint.label(), code: code_label(code) })
            .inc(),
    };
    series.latency.observe(start.elapsed().as_secs_f64());
    response
}

async fn admit_inner<B>(
    state: &AppState,
    endpoint: Endpoint,
    req: http::Request<B>,
    start: Instant,
    share: &Arc<ConnShare>,
) -> Response
where
    B: HttpBody<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let inner = &state.0;
    let (parts, body) = req.into_parts();

    if !is_json(parts.headers.get(header::CONTENT_TYPE)) {
        let got = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("none");
        return unsupported_media_type(endpoint, got);
    }
    let too_large = || {
        status_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("request body exceeds the limit of {} bytes (--max-body-bytes)", inner.max_body_bytes),
        )
    };
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > inner.max_body_bytes as u64) {
        return too_large();
    }

    let timeout = parse_timeout_query(parts.uri.query()).unwrap_or(DEFAULT_TIMEOUT);
    let deadline = tokio::time::Instant::from_std(start + handler_deadline(timeout));
    // The body gets `--body-read-timeout` at most, whatever `?timeout=` the client chose: a
    // stalled body cannot hold its budget for the 30 s a caller may ask for.
    let body_deadline = deadline.min(tokio::time::Instant::from_std(start + inner.body_read_timeout));
    // Held until the answer is built: the body's bytes count against the budget while they exist.
    let class = BodyClass::of(declared);
    let mut held = Held::with_share(&inner.budget, class, share);
    let body = match read_body(body, inner.max_body_bytes, &mut held, body_deadline).await {
        Ok(body) => body,
        Err(BodyError::Deadline) => return deadline_missed(endpoint, timeout.min(inner.body_read_timeout), inner),
        Err(BodyError::TooLarge) => return too_large(),
        Err(BodyError::Budget) => return budget_exhausted(endpoint, inner),
        Err(BodyError::Read(e)) => {
            return status_response(StatusCode::BAD_REQUEST, "BadRequest", format!("reading request body: {e}"));
        }
    };

    let (code, answer) = match admission::review(endpoint, &body, &inner.rules, inner.cluster.as_ref()) {
        Ok(reviewed) => {
            record_decision(inner, endpoint, &reviewed);
            (StatusCode::OK, reviewed.body)
        }
        Err(e) => return protocol_error(endpoint, e),
    };
    drop(body);
    // The answer keeps budget until it is written: answers a client never reads stay bounded.
    let held = held.keep_for_answer(answer.len(), inner.budget.clone(), Some(share.clone()));
    let mut response = Response::new(ResponseBody::holding(answer, held));
    *response.status_mut() = code;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

enum BodyError {
    Deadline,
    TooLarge,
    Budget,
    Read(Box<dyn std::error::Error + Send + Sync>),
}

/// Reads the whole body, taking budget for each chunk before keeping it. Not polling the body
/// while waiting for budget is the back-pressure: hyper stops reading the socket. The usual body
/// has arrived with its headers, so a first poll that is ready never arms a timer.
async fn read_body<B>(
    body: B,
    max: usize,
    held: &mut Held<'_>,
    deadline: tokio::time::Instant,
) -> Result<Bytes, BodyError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<u8> = Vec::new();
    loop {
        let mut next = std::pin::pin!(body.frame());
        let frame = match futures::poll!(next.as_mut()) {
            Poll::Ready(frame) => frame,
            Poll::Pending => tokio::time::timeout_at(deadline, next).await.map_err(|_| BodyError::Deadline)?,
        };
        let Some(frame) = frame else { break };
        let Ok(data) = frame.map_err(|e| BodyError::Read(Box::new(e)))?.into_data() else { continue };
        if held.bytes() + data.len() > max {
            return Err(BodyError::TooLarge);
        }
        held.take(data.len(), deadline).await.map_err(|_| BodyError::Budget)?;
        // One chunk (the usual case) is kept as it is; more are copied into one buffer. It grows
        // with what arrived, not with what the client declared: an upload that stalls holds
        // memory for the bytes it sent (and counted), not for the ones it promised. (Keeping
        // the chunks instead would pin hyper's read buffers, up to 64 KiB per chunk.)
        match first.take() {
            None if rest.is_empty() => first = Some(data),
            None => rest.extend_from_slice(&data),
            Some(previous) => {
                rest.reserve_exact(2 * (previous.len() + data.len()));
                rest.extend_from_slice(&previous);
                rest.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(rest)))
}

/// The body budget stayed spent for [`super::budget::BUDGET_WAIT`]: a retryable 429 (the API server's client
/// retries it after `Retry-After`).
fn budget_exhausted(endpoint: Endpoint, inner: &Inner) -> Response {
    tracing::warn!(
        webhook = endpoint.path(),
        budget_bytes = inner.budget.total(),
        "request bodies in flight hold the whole --max-inflight-body-bytes budget; answered 429"
    );
    let mut response = status_response_with_details(
        StatusCode::TOO_MANY_REQUESTS,
        "TooManyRequests",
        format!(
            "the server is reading too many request bodies at once (--max-inflight-body-bytes {}); retry the request",
            inner.budget.total()
        ),
        serde_json::json!({"retryAfterSeconds": 1}),
    );
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

fn record_decision(inner: &Inner, endpoint: Endpoint, reviewed: &admission::Reviewed) {
    let decision = &reviewed.decision;
    let allowed = decision.allowed();
    inner.metrics.count_decision(DecisionLabels {
        webhook: endpoint.label(),
        operation: reviewed.operation,
        allowed: if allowed { "true" } else { "false" },
        rule: decision.rule(),
    });
    if allowed {
        tracing::debug!(
            webhook = endpoint.path(), uid = %reviewed.uid, operation = reviewed.operation,
            namespace = %reviewed.namespace, name = %reviewed.name, rule = decision.rule(),
            dry_run = reviewed.dry_run, patched = decision.patch.is_some(), "allowed"
        );
    } else {
        let (rule, detail) = (&reviewed.rendered.audit_rules, &reviewed.rendered.message);
        tracing::info!(
            webhook = endpoint.path(), uid = %reviewed.uid, operation = reviewed.operation,
            namespace = %reviewed.namespace, name = %reviewed.name, rule = %rule,
            dry_run = reviewed.dry_run, detail = %detail, "denied"
        );
    }
}

/// The body did not arrive before the deadline: deny (500, retryable) rather than let the API
/// server time out. The uid is unknown, so the API server reports a mismatch — still sooner.
fn deadline_missed(endpoint: Endpoint, timeout: Duration, inner: &Inner) -> Response {
    let decision = Decision::from_errors(
        vec![FieldError::new(
            Rule::Deadline,
            ErrorType::Internal,
            "request",
            format!("the request body did not arrive within the {timeout:?} deadline; retry the request"),
        )],
        Rule::Deadline,
    );
    tracing::warn!(webhook = endpoint.path(), ?timeout, "request body did not arrive before the deadline");
    inner
        .metrics
        .decisions
        .get_or_create(&DecisionLabels {
            webhook: endpoint.label(),
            operation: "UNKNOWN",
            allowed: "false",
            rule: Rule::Deadline.as_str(),
        })
        .inc();
    json_response(StatusCode::OK, admission::response::review_bytes("", &decision, ""))
}

fn protocol_error(endpoint: Endpoint, error: ProtocolError) -> Response {
    tracing::warn!(webhook = endpoint.path(), error = %error, "rejected a request that is not a usable AdmissionReview");
    status_response(StatusCode::BAD_REQUEST, "BadRequest", error.to_string())
}

fn unsupported_media_type(endpoint: Endpoint, got: &str) -> Response {
    tracing::warn!(
        webhook = endpoint.path(),
        content_type = got,
        "request with a Content-Type other than application/json"
    );
    status_response(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        format!("Content-Type must be application/json, got {got}"),
    )
}

fn not_found<B>(req: &http::Request<B>) -> Response {
    tracing::warn!(path = req.uri().path(), method = %req.method(), "request for an unknown path");
    status_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no webhook at {}: use {} or {}", req.uri().path(), Endpoint::Validate.path(), Endpoint::Mutate.path()),
    )
}

fn method_not_allowed<B>(req: &http::Request<B>) -> Response {
    tracing::warn!(path = req.uri().path(), method = %req.method(), "request with a method other than POST");
    let mut response = status_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("{} is not allowed on {}: admission reviews are POSTed", req.method(), req.uri().path()),
    );
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

/// `application/json`, with optional parameters (`; charset=utf-8`).
fn is_json(value: Option<&HeaderValue>) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// A Kubernetes `Status` body for failures that have no AdmissionReview to answer.
pub(crate) fn status_response(code: StatusCode, reason: &str, message: String) -> Response {
    status_response_with_details(code, reason, message, serde_json::Value::Null)
}

fn status_response_with_details(
    code: StatusCode,
    reason: &str,
    message: String,
    details: serde_json::Value,
) -> Response {
    let mut body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    if !details.is_null() {
        body["details"] = details;
    }
    json_response(code, serde_json::to_vec(&body).unwrap_or_default())
}

fn json_response(code: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(ResponseBody::from(body));
    *response.status_mut() = code;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod log_tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A 415 is a protocol failure like the others: it says so in the log, with what came.
    #[test]
    fn a_wrong_content_type_is_logged() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber =
            tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).without_time().finish();
        let response =
            tracing::subscriber::with_default(subscriber, || unsupported_media_type(Endpoint::Validate, "text/plain"));
        assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(logged.contains("WARN"), "{logged}");
        assert!(
            logged.contains("content_type=\"text/plain\"") || logged.contains("content_type=text/plain"),
            "{logged}"
        );
        assert!(logged.contains(Endpoint::Validate.path()), "{logged}");
    }
}
