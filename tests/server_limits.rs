//! Bounded memory and work under hostile or broken clients, against the real server over TLS:
//! the body budget (back-pressure, then a retryable 429, small reviews still served), the
//! connection caps of both listeners, idle and header timeouts on the admin port too, and the
//! HTTP/2 settings the server advertises.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

const UID: &str = "0c6f8a8e-1d1b-4a7e-9a55-000000000042";

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn connect(server: &TestServer) -> Tls {
    let tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap()
}

/// Sends the head of a POST declaring `declared` bytes, then `sent` bytes of body.
async fn upload(conn: &mut Tls, declared: usize, sent: usize) {
    // A 30 s deadline: the uploads that hold budget stay unanswered while the test looks.
    let head = format!(
        "POST {VALIDATE}?timeout=30s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 64 * 1024];
    let mut left = sent;
    while left > 0 {
        let n = left.min(chunk.len());
        conn.write_all(&chunk[..n]).await.unwrap();
        left -= n;
    }
    conn.flush().await.unwrap();
}

/// Reads one response (headers and `Content-Length` bytes of body), or until the connection
/// closes or `limit` passes: what arrived.
async fn read_for(conn: &mut Tls, limit: Duration) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let until = tokio::time::Instant::now() + limit;
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, conn.read(&mut chunk)).await {
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if response_complete(&buf) {
            break;
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn response_complete(buf: &[u8]) -> bool {
    let text = String::from_utf8_lossy(buf);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>()))
        .and_then(Result::ok);
    length.is_some_and(|n| body.len() >= n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_uploads_get_back_pressure_then_429_while_small_reviews_pass() {
    // 4 MiB budget: 1 MiB reserved for small bodies, 3 MiB shared.
    let mut server =
        start(Options { max_inflight_body_bytes: 4 << 20, max_body_bytes: 2 << 20, ..Default::default() }).await;
    // Three uploads that declare 2 MiB, send 1.5 MiB and stall: together they want 4.5 MiB of
    // the 3 MiB shared part, so at least one must wait for budget that never comes back.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let mut conn = connect(&server).await;
        // An upload without budget stops being read; its writes block once the socket buffers
        // are full, so they are cut short here.
        let _ = tokio::time::timeout(Duration::from_secs(2), upload(&mut conn, 2 << 20, 1536 << 10)).await;
        stalled.push(conn);
    }
    // A normal review on another connection is answered at once (from the reserve).
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let started = Instant::now();
    let reply = post_json(&client(&server.ca_pem, false), &server.url(VALIDATE), &body).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.json()["response"]["uid"], UID);
    assert!(started.elapsed() < Duration::from_secs(2), "small review waited {:?}", started.elapsed());

    // The upload(s) left without budget get a retryable 429 after the 3 s wait.
    let mut throttled = 0;
    let answers = futures::future::join_all(stalled.iter_mut().map(|c| read_for(c, Duration::from_secs(6)))).await;
    for text in answers {
        if text.is_empty() {
            continue; // holds budget, waits for the rest of its body until its deadline
        }
        assert!(text.starts_with("HTTP/1.1 429"), "{text}");
        assert!(text.to_ascii_lowercase().contains("retry-after: 1"), "{text}");
        assert!(text.contains(r#""reason":"TooManyRequests""#), "{text}");
        assert!(text.contains(r#""retryAfterSeconds":1"#), "{text}");
        throttled += 1;
    }
    assert!(throttled >= 1, "no upload was throttled");
    assert!(throttled < 3, "every upload was throttled: the budget let none through");
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let series = format!(r#"controller_runtime_webhook_requests_total{{webhook="{VALIDATE}",code="429"}} {throttled}"#);
    assert!(metrics.contains(&series), "{series} not in {metrics}");
    drop(stalled);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_comes_back_when_a_request_is_answered() {
    let mut server =
        start(Options { max_inflight_body_bytes: 4 << 20, max_body_bytes: 2 << 20, ..Default::default() }).await;
    // Sequential big bodies, each alone bigger than half the shared part: if the budget leaked,
    // the second or third would be throttled.
    for i in 0..4 {
        let mut conn = connect(&server).await;
        let filler = " ".repeat((1536 << 10) - 200);
        let body = format!(r#"{{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"{filler}}}"#);
        conn.write_all(
            format!(
                "POST {VALIDATE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let text = read_for(&mut conn, Duration::from_secs(10)).await;
        assert!(text.starts_with("HTTP/1.1 400"), "round {i}: {text}"); // no `request`: a 400, not a 429
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_holds_new_connections_back_until_one_closes() {
    let mut server = start(Options { max_connections: 2, ..Default::default() }).await;
    let first = connect(&server).await;
    let _second = connect(&server).await;
    // The third TCP connection sits in the backlog: its TLS handshake does not complete.
    let tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    let connector = TlsConnector::from(Arc::new(tls));
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut third = Box::pin(connector.connect("localhost".try_into().unwrap(), tcp));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut third).await.is_err(),
        "a third connection was served beyond --max-connections 2"
    );
    drop(first);
    let mut third =
        tokio::time::timeout(Duration::from_secs(5), third).await.expect("served once a slot came free").unwrap();
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let head = format!(
        "POST {VALIDATE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    third.write_all(head.as_bytes()).await.unwrap();
    third.write_all(&body).await.unwrap();
    let text = read_for(&mut third, Duration::from_secs(5)).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    assert!(metrics.contains(r#"trainguard_open_connections{listener="webhook"} 2"#), "{metrics}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_close_on_both_ports() {
    let mut server = start(Options { idle_timeout: Duration::from_millis(400), ..Default::default() }).await;
    // Webhook: one request, then silence.
    let mut conn = connect(&server).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    upload_json(&mut conn, &body).await;
    assert!(read_for(&mut conn, Duration::from_secs(5)).await.starts_with("HTTP/1.1 200"));
    let started = Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "idle webhook connection still open after 5 s");
    assert!(started.elapsed() >= Duration::from_millis(300), "closed before the idle timeout: {:?}", started.elapsed());

    // Admin: a keep-alive scrape, then silence.
    let mut admin = tokio::net::TcpStream::connect(server.admin).await.unwrap();
    admin.write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 1024];
    let n = admin.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), admin.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "idle admin connection still open after 5 s");
    server.shutdown().await;
}

async fn upload_json(conn: &mut Tls, body: &[u8]) {
    let head = format!(
        "POST {VALIDATE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body).await.unwrap();
    conn.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_has_a_header_timeout_and_a_connection_cap() {
    let mut server = start(Options {
        header_read_timeout: Duration::from_millis(300),
        max_admin_connections: 1,
        ..Default::default()
    })
    .await;
    // A client that never finishes its headers is cut off.
    let mut slow = tokio::net::TcpStream::connect(server.admin).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHo").await.unwrap();
    // While it holds the only slot, a second client is not served.
    let mut second = tokio::net::TcpStream::connect(server.admin).await.unwrap();
    second.write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 256];
    assert!(
        tokio::time::timeout(Duration::from_millis(150), second.read(&mut buf)).await.is_err(),
        "served beyond --max-admin-connections 1"
    );
    let mut rest = Vec::new();
    let cut = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(cut.is_ok(), "header-less admin connection still open after 5 s");
    // Its slot freed, the second client is answered.
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), second.read_to_string(&mut answer)).await.unwrap().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_advertises_its_windows_streams_and_header_limit() {
    let mut server = start(Options { http2: true, http2_max_concurrent_streams: 7, ..Default::default() }).await;
    let mut tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let conn = TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    let (send, connection) = h2::client::handshake(conn).await.unwrap();
    tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();

    // A 150 KB review can be sent whole at once: the stream's capacity (the smaller of the
    // stream and connection windows) reaches 256 KiB without any data sent.
    let request = |extra: Option<String>| {
        let mut b =
            http::Request::post(format!("https://localhost{VALIDATE}")).header("content-type", "application/json");
        if let Some(v) = extra {
            b = b.header("x-padding", v);
        }
        b.body(()).unwrap()
    };
    let (response, mut stream) = send.send_request(request(None), false).unwrap();
    stream.reserve_capacity(300 * 1024);
    let mut capacity = 0;
    let until = Instant::now() + Duration::from_secs(5);
    while capacity < 256 * 1024 && Instant::now() < until {
        match tokio::time::timeout(Duration::from_millis(200), std::future::poll_fn(|cx| stream.poll_capacity(cx)))
            .await
        {
            Ok(Some(Ok(n))) => capacity = capacity.max(n),
            Ok(other) => panic!("stream capacity: {other:?}"),
            Err(_) => {}
        }
    }
    assert_eq!(capacity, 256 * 1024, "stream window as the server advertised it");
    assert_eq!(send.current_max_send_streams(), 7, "max concurrent streams as configured");
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    stream.send_data(body.into(), true).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);

    // The header-list limit: 12 KiB of headers pass, 20 KiB are refused.
    let mut outcomes = Vec::new();
    for size in [12 * 1024, 20 * 1024] {
        let mut send = send.clone().ready().await.unwrap();
        let refused = match send.send_request(request(Some("x".repeat(size))), true) {
            Err(_) => true,
            Ok((response, _)) => match tokio::time::timeout(Duration::from_secs(5), response).await.unwrap() {
                Err(_) => true,
                Ok(r) => r.status() == http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            },
        };
        outcomes.push(refused);
    }
    let refused = outcomes == [false, true];
    assert!(refused, "12 KiB and 20 KiB of headers refused: {outcomes:?} (want [false, true])");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_close_too() {
    let mut server =
        start(Options { http2: true, idle_timeout: Duration::from_millis(400), ..Default::default() }).await;
    let mut tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let conn = TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    let (send, connection) = h2::client::handshake(conn).await.unwrap();
    let connection = tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let request = http::Request::post(format!("https://localhost{VALIDATE}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (response, mut stream) = send.send_request(request, false).unwrap();
    stream.send_data(body.into(), true).unwrap();
    assert_eq!(response.await.unwrap().status(), 200);
    // Then silence: the server sends GOAWAY and the connection ends.
    let started = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(5), connection).await;
    assert!(ended.is_ok(), "idle HTTP/2 connection still open after 5 s");
    assert!(started.elapsed() >= Duration::from_millis(300), "closed before the idle timeout: {:?}", started.elapsed());
    server.shutdown().await;
}

#[tokio::test]
async fn limits_that_cannot_work_are_refused_at_start() {
    trainguard::server::tls::install_default_provider();
    let dir = tempfile::tempdir().unwrap();
    write_secret_volume(dir.path(), &chain(), 1);
    let cases: &[(Options, &str)] = &[
        (
            Options { max_inflight_body_bytes: 8 << 20, max_body_bytes: 7 << 20, ..Default::default() },
            "--max-inflight-body-bytes (8388608) must be at least 4/3 of --max-body-bytes (7340032)",
        ),
        (Options { max_connections: 0, ..Default::default() }, "--max-connections must be at least 1"),
        (Options { max_admin_connections: 0, ..Default::default() }, "--max-admin-connections must be at least 1"),
        (
            Options { http2_max_concurrent_streams: 0, ..Default::default() },
            "--http2-max-concurrent-streams must be at least 1",
        ),
    ];
    for (opts, want) in cases {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = trainguard::metrics::WebhookMetrics::register(&mut registry);
        let started = trainguard::server::start(
            settings_for(dir.path(), opts),
            opts.cluster.clone(),
            None,
            metrics,
            Arc::new(registry),
        )
        .await;
        let error = started.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains(want), "want {want:?}, got {error:?}");
    }
}
