//! Bounded memory and work under hostile or broken clients, against the real server over TLS:
//! the body budget (back-pressure, then a retryable 429, small reviews still served), the body
//! read deadline, the connection caps of both listeners and per client address, idle keep-alive
//! connections that outlive the header timeout, first-request and HTTP/2 preface deadlines,
//! probes answered on a full admin port, and the HTTP/2 settings the server advertises.
//!
//! Attacks come from 127.0.0.1; the well-behaved client whose review must still be answered
//! comes from 127.0.0.2, as a pod and the API server have different addresses.

use trainguard_binary_support::tls as support;
use trainguard_fake_api::wait::eventually_async;

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

/// The kubelet's probes, from another address, answer 200 in under a second.
async fn assert_probes_answer(server: &TestServer, during: &str) {
    for path in ["/healthz", "/readyz"] {
        let started = Instant::now();
        let (status, body) = admin_get_from("127.0.0.2", server.admin, path).await;
        assert_eq!(status, 200, "{during}: {path}: {body}");
        assert!(started.elapsed() < Duration::from_secs(1), "{during}: {path} took {:?}", started.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_uploads_get_back_pressure_then_429_while_small_reviews_pass() {
    // 4 MiB budget: 1 MiB reserved for small bodies, 3 MiB shared.
    let mut server = start(Options::from(ServerSettings {
        max_inflight_body_bytes: 4 << 20,
        max_body_bytes: 2 << 20,
        // Longer than the 3 s budget wait, so that the 429 is what a starved upload sees.
        body_read_timeout: Duration::from_secs(30),
        ..defaults()
    }))
    .await;
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
    // Every chunk that waits for budget started waiting by now, so it is answered 429 within the
    // server's 3 s budget wait from here (plus headroom for a loaded machine); an upload still
    // unanswered then holds budget and waits for the rest of its body.
    let uploaded = tokio::time::Instant::now();
    let answered_by = uploaded + Duration::from_millis(4500);
    // A normal review on another connection is answered at once (from the reserve).
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let started = Instant::now();
    let reply = post_json(&client(&server.ca_pem, false), &server.url(VALIDATE), &body).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.json()["response"]["uid"], UID);
    assert!(started.elapsed() < Duration::from_secs(2), "small review waited {:?}", started.elapsed());

    // The upload(s) left without budget get a retryable 429 after the 3 s wait.
    let mut throttled = 0;
    let left = answered_by.saturating_duration_since(tokio::time::Instant::now());
    let answers = futures::future::join_all(stalled.iter_mut().map(|c| read_response(c, left))).await;
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
    let mut server = start(Options::from(ServerSettings {
        max_inflight_body_bytes: 4 << 20,
        max_body_bytes: 2 << 20,
        ..defaults()
    }))
    .await;
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
        let text = read_response(&mut conn, Duration::from_secs(10)).await;
        assert!(text.starts_with("HTTP/1.1 400"), "round {i}: {text}"); // no `request`: a 400, not a 429
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_holds_new_connections_back_until_one_closes() {
    let mut server = start(Options::from(ServerSettings { max_connections: 2, ..defaults() })).await;
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
    let text = read_response(&mut third, Duration::from_secs(5)).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    assert!(metrics.contains(r#"trainguard_open_connections{listener="webhook"} 2"#), "{metrics}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_close_on_both_ports() {
    let mut server =
        start(Options::from(ServerSettings { idle_timeout: Duration::from_millis(400), ..defaults() })).await;
    // Webhook: one request, then silence.
    let mut conn = connect(&server).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    upload_json(&mut conn, &body).await;
    assert!(read_response(&mut conn, Duration::from_secs(5)).await.starts_with("HTTP/1.1 200"));
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
    let mut server = start(Options::from(ServerSettings {
        header_read_timeout: Duration::from_millis(300),
        max_admin_connections: 1,
        ..defaults()
    }))
    .await;
    // A client that never finishes its headers is cut off.
    let mut slow = tokio::net::TcpStream::connect(server.admin).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHo").await.unwrap();
    // Once it holds the only slot (accepted), a scrape lands in a probe slot: probes only.
    let mut body = String::new();
    eventually_async("a scrape refused while the slow client holds the slot", async || {
        let status;
        (status, body) = admin_get(server.admin, "/metrics").await;
        status == 503
    })
    .await;
    assert!(body.contains("probes only"), "{body}");
    let (status, _) = admin_get(server.admin, "/healthz").await;
    assert_eq!(status, 200, "/healthz on a full admin port");
    let mut rest = Vec::new();
    let cut = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(cut.is_ok(), "header-less admin connection still open after 5 s");
    // Its slot freed, a scrape is answered.
    let (status, body) = admin_get(server.admin, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#"trainguard_connections_refused_total{listener="admin",reason="header_timeout"} 1"#),
        "{body}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_answered_while_idle_connections_fill_the_admin_port() {
    let mut server =
        start(Options::from(ServerSettings { max_admin_connections: 8, max_connections_per_ip: 4, ..defaults() }))
            .await;
    // Two noisy addresses, each at its per-address cap, fill all 8 admin slots and stay silent;
    // more connections from them are closed at once.
    let mut idle = Vec::new();
    for source in ["127.0.0.1", "127.0.0.3"] {
        for _ in 0..4 {
            idle.push(connect_from(source, server.admin).await);
        }
    }
    let mut extra = connect_from("127.0.0.1", server.admin).await;
    assert!(closes_within(&mut extra, Duration::from_secs(1)).await, "a fifth connection from one address was kept");
    // Once the server has taken all eight in, a scrape from elsewhere is told the port is full.
    let mut metrics = String::new();
    eventually_async("the admin port full", async || {
        metrics = admin_get_from("127.0.0.2", server.admin, "/metrics").await.1;
        metrics.contains("probes only")
    })
    .await;
    // The kubelet (another address) still gets its probes, promptly.
    for path in ["/healthz", "/readyz"] {
        let started = Instant::now();
        let (status, body) = admin_get_from("127.0.0.2", server.admin, path).await;
        assert_eq!(status, 200, "{path}: {body}");
        eprintln!("measured: probe on a full admin port {path} answered in {:?}", started.elapsed());
        assert!(started.elapsed() < Duration::from_secs(1), "{path} took {:?}", started.elapsed());
    }
    assert!(metrics.contains("probes only"), "a scrape on a full admin port is told so: {metrics}");
    let (status, _) = admin_get_from("127.0.0.2", server.admin, "/metrics").await;
    assert_eq!(status, 503);
    drop(idle);
    // The slots come free as the server sees the connections close.
    let mut metrics_after = String::new();
    eventually_async("a scrape answered once the idle connections closed", async || {
        let status;
        (status, metrics_after) = admin_get_from("127.0.0.2", server.admin, "/metrics").await;
        status == 200
    })
    .await;
    assert!(
        metrics_after.contains(r#"trainguard_connections_refused_total{listener="admin",reason="per_ip_cap"} 1"#),
        "{metrics_after}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods, reason = "the server's timers on a real socket are what is tested")]
async fn an_idle_keep_alive_connection_outlives_the_header_timeout() {
    // The API server keeps idle connections up to 90 s and sends the next review on them; hyper's
    // own header timeout would close them after the header timeout instead of the idle timeout.
    let mut server = start(Options::from(ServerSettings {
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(10),
        ..defaults()
    }))
    .await;
    let mut conn = connect(&server).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let (status, text) = http1_post(&mut conn, VALIDATE, &body, Duration::from_secs(5)).await;
    assert_eq!(status, 200, "{text}");
    // Idle for more than twice the header timeout (real time: the server's timers on a real
    // socket are what is tested), then the next review on the same connection.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let started = Instant::now();
    let (status, text) = http1_post(&mut conn, VALIDATE, &body, Duration::from_secs(5)).await;
    assert_eq!(status, 200, "second review on an idle keep-alive connection: {text:?}");
    eprintln!("measured: second review on an idle keep-alive connection answered in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(1), "answered in {:?}", started.elapsed());

    // Headers that start after an idle spell longer than the header timeout (real time, as
    // above) still get the whole header timeout.
    tokio::time::sleep(Duration::from_millis(500)).await;
    conn.write_all(format!("POST {VALIDATE} HTTP/1.1\r\nHost: loc").as_bytes()).await.unwrap();
    let started = Instant::now();
    assert!(closes_within(&mut conn, Duration::from_secs(5)).await, "slow headers after an idle spell kept open");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(2), "cut after {took:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_send_nothing_after_the_handshake_are_cut_at_the_header_timeout() {
    let mut server = start(Options::from(ServerSettings {
        http2: true,
        header_read_timeout: Duration::from_millis(300),
        // 8 MiB of body budget: 2 HTTP/2 connection slots, both taken below.
        max_inflight_body_bytes: 8 << 20,
        max_body_bytes: 6 << 20,
        ..defaults()
    }))
    .await;
    // HTTP/1.1 without a first byte, and HTTP/2 without a preface from two addresses (one
    // address may hold only one of the two HTTP/2 slots), holding both HTTP/2 slots.
    let mut silent = vec![
        tls_from("127.0.0.1", server.addr, &server.ca_pem, &[b"http/1.1"]).await,
        tls_from("127.0.0.1", server.addr, &server.ca_pem, &[b"h2"]).await,
        tls_from("127.0.0.3", server.addr, &server.ca_pem, &[b"h2"]).await,
    ];
    assert_probes_answer(&server, "connections that send nothing").await;
    let started = Instant::now();
    for conn in &mut silent {
        assert!(closes_within(conn, Duration::from_secs(3)).await, "a silent connection was kept");
    }
    assert!(started.elapsed() < Duration::from_secs(2), "cut after {:?}", started.elapsed());
    // The HTTP/2 slots are free again: a real HTTP/2 review is answered at once.
    let conn = tls_from("127.0.0.2", server.addr, &server.ca_pem, &[b"h2"]).await;
    let (send, connection) = h2::client::handshake(conn).await.unwrap();
    tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let request = http::Request::post(format!("https://localhost{VALIDATE}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let started = Instant::now();
    let (response, mut stream) = send.send_request(request, false).unwrap();
    stream.send_data(update_review(UID, trainjob(false, "a"), trainjob(false, "a")).into(), true).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(1), response).await.expect("answered").unwrap();
    assert_eq!(response.status(), 200);
    eprintln!("measured: HTTP/2 review after silent connections answered in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(1));
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let series = r#"trainguard_connections_refused_total{listener="webhook",reason="header_timeout"} 3"#;
    assert!(metrics.contains(series), "{series} not in {metrics}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_a_quarter_of_the_http2_slots_at_most() {
    // 32 MiB of body budget: 8 HTTP/2 connection slots, 2 per address.
    let mut server =
        start(Options::from(ServerSettings { http2: true, max_inflight_body_bytes: 32 << 20, ..defaults() })).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(tls_from("127.0.0.1", server.addr, &server.ca_pem, &[b"h2"]).await);
    }
    // A third HTTP/2 connection from the same address is closed at once.
    let mut third = tls_from("127.0.0.1", server.addr, &server.ca_pem, &[b"h2"]).await;
    assert!(closes_within(&mut third, Duration::from_secs(1)).await, "a third HTTP/2 connection was kept");
    // Those two hold their slots (silent, until the header timeout); others are served.
    let conn = tls_from("127.0.0.2", server.addr, &server.ca_pem, &[b"h2"]).await;
    let (send, connection) = h2::client::handshake(conn).await.unwrap();
    tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let request = http::Request::post(format!("https://localhost{VALIDATE}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (response, mut stream) = send.send_request(request, false).unwrap();
    stream.send_data(update_review(UID, trainjob(false, "a"), trainjob(false, "a")).into(), true).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(1), response).await.expect("answered").unwrap();
    assert_eq!(response.status(), 200);
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let series = r#"trainguard_connections_refused_total{listener="webhook",reason="per_ip_cap"} 1"#;
    assert!(metrics.contains(series), "{series} not in {metrics}");
    drop(held);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_webhook_connection() {
    // The attack scaled down: 64 connections that never send a ClientHello against a cap of 16.
    let mut server =
        start(Options::from(ServerSettings { max_connections: 16, max_connections_per_ip: 8, ..defaults() })).await;
    let mut noisy = Vec::new();
    for _ in 0..64 {
        noisy.push(connect_from("127.0.0.1", server.addr).await);
    }
    // Those beyond the address's 8 are closed at once, not queued.
    let mut closed = 0;
    for conn in &mut noisy {
        if closes_within(conn, Duration::from_millis(100)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 56, "connections beyond --max-connections-per-ip 8 closed at once");
    // Another client is served promptly while the 8 silent ones hold their slots.
    let started = Instant::now();
    let mut conn = tls_from("127.0.0.2", server.addr, &server.ca_pem, &[b"http/1.1"]).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let (status, text) = http1_post(&mut conn, VALIDATE, &body, Duration::from_secs(5)).await;
    assert_eq!(status, 200, "{text}");
    eprintln!("measured: review while one address holds its share answered in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(1), "answered in {:?}", started.elapsed());
    assert_probes_answer(&server, "silent connections at the per-address cap").await;
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let series = r#"trainguard_connections_refused_total{listener="webhook",reason="per_ip_cap"} 56"#;
    assert!(metrics.contains(series), "{series} not in {metrics}");
    drop(noisy);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_are_cut_at_the_body_read_timeout_whatever_timeout_they_ask_for() {
    // The attack scaled down: stalled 256 KiB − 1 byte bodies asking for ?timeout=30s, more than
    // the 4 MiB budget could hold, from one address.
    let mut server = start(Options::from(ServerSettings {
        max_inflight_body_bytes: 4 << 20,
        max_body_bytes: 2 << 20,
        max_connections_per_ip: 8,
        body_read_timeout: Duration::from_millis(800),
        ..defaults()
    }))
    .await;
    let mut stalled = Vec::new();
    for _ in 0..24 {
        let tcp = connect_from("127.0.0.1", server.addr).await;
        let tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
        let Ok(Ok(mut conn)) = tokio::time::timeout(
            Duration::from_millis(500),
            TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp),
        )
        .await
        else {
            continue; // closed at once: beyond the address's share
        };
        let _ = tokio::time::timeout(Duration::from_millis(500), upload(&mut conn, (256 << 10) - 1, 255 << 10)).await;
        stalled.push(conn);
    }
    let sent = Instant::now();
    // A real review from elsewhere is answered at once: one address holds at most 8 × 255 KiB.
    let mut conn = tls_from("127.0.0.2", server.addr, &server.ca_pem, &[b"http/1.1"]).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let started = Instant::now();
    let (status, text) = http1_post(&mut conn, VALIDATE, &body, Duration::from_secs(5)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(UID), "a real verdict, not a deadline denial: {text}");
    assert_probes_answer(&server, "stalled bodies").await;
    eprintln!("measured: review while stalled bodies hold their share answered in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(1), "answered in {:?}", started.elapsed());
    // The stalled bodies are answered at the body read timeout, not at their 30 s.
    let answers = futures::future::join_all(stalled.iter_mut().map(|c| read_response(c, Duration::from_secs(3)))).await;
    let waited = sent.elapsed();
    assert!(!answers.is_empty());
    for text in &answers {
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("did not arrive within the 800ms deadline"), "{text}");
    }
    assert!(waited < Duration::from_secs(3), "stalled bodies held until {waited:?}");
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    assert!(metrics.contains("trainguard_inflight_body_bytes 0"), "budget given back: {metrics}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_advertises_its_windows_streams_and_header_limit() {
    let mut server =
        start(Options::from(ServerSettings { http2: true, http2_max_concurrent_streams: 7, ..defaults() })).await;
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
        start(Options::from(ServerSettings { http2: true, idle_timeout: Duration::from_millis(400), ..defaults() }))
            .await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_http2_connection_holds_its_share_of_the_body_budget_at_most() {
    // 16 MiB budget: a connection's bodies may hold 2 MiB together (an eighth).
    let mut server = start(Options::from(ServerSettings {
        http2: true,
        max_inflight_body_bytes: 16 << 20,
        max_body_bytes: 1 << 20,
        body_read_timeout: Duration::from_secs(30),
        ..defaults()
    }))
    .await;
    let conn = tls_from("127.0.0.1", server.addr, &server.ca_pem, &[b"h2"]).await;
    let (send, connection) = h2::client::handshake(conn).await.unwrap();
    tokio::spawn(connection);
    // 16 small bodies (256 KiB − 1 declared, 200 KiB sent, then a stall): 3.2 MiB on one connection.
    let mut responses = Vec::new();
    let mut streams = Vec::new();
    for _ in 0..16 {
        let mut send = send.clone().ready().await.unwrap();
        let request = http::Request::post(format!("https://localhost{VALIDATE}?timeout=30s"))
            .header("content-type", "application/json")
            .header("content-length", (256 << 10) - 1)
            .body(())
            .unwrap();
        let (response, mut stream) = send.send_request(request, false).unwrap();
        stream.send_data(vec![b' '; 200 << 10].into(), false).unwrap();
        responses.push(response);
        streams.push(stream);
    }
    // A stream past its connection's share is answered 429 at once, without waiting for budget;
    // one still unanswered after a second (headroom for a loaded machine) holds budget.
    let started = Instant::now();
    let answers = futures::future::join_all(
        responses.into_iter().map(|r| async { tokio::time::timeout(Duration::from_secs(1), r).await }),
    )
    .await;
    let throttled =
        answers.iter().filter(|a| matches!(a, Ok(Ok(r)) if r.status() == http::StatusCode::TOO_MANY_REQUESTS)).count();
    let waiting = answers.iter().filter(|a| a.is_err()).count();
    assert_eq!(throttled + waiting, 16, "every stream either holds budget or got 429: {answers:?}");
    assert!((5..=10).contains(&throttled), "{throttled} of 16 throttled; 2 MiB holds 10 × 200 KiB at most");
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let held: usize = metrics
        .lines()
        .find_map(|l| l.strip_prefix("trainguard_inflight_body_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the gauge");
    assert!(held <= 2 << 20, "one connection holds {held} bytes, past its 2 MiB share");
    assert!(held >= 1 << 20, "the streams that fit hold their bytes: {held}");
    // Another connection is served at once.
    let mut conn = tls_from("127.0.0.2", server.addr, &server.ca_pem, &[b"http/1.1"]).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let asked = Instant::now();
    let (status, text) = http1_post(&mut conn, VALIDATE, &body, Duration::from_secs(5)).await;
    assert_eq!(status, 200, "{text}");
    eprintln!("measured: review beside an HTTP/2 connection at its share answered in {:?}", asked.elapsed());
    assert!(asked.elapsed() < Duration::from_secs(1));
    assert_probes_answer(&server, "an HTTP/2 connection at its share").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(streams);
    server.shutdown().await;
}

#[tokio::test]
async fn limits_that_cannot_work_are_refused_at_start() {
    trainguard::server::tls::install_default_provider();
    let dir = tempfile::tempdir().unwrap();
    write_secret_volume(dir.path(), &chain(), 1);
    let cases: &[(Options, &str)] = &[
        (
            Options::from(ServerSettings { max_inflight_body_bytes: 8 << 20, max_body_bytes: 7 << 20, ..defaults() }),
            "--max-inflight-body-bytes (8388608) must be at least 4/3 of --max-body-bytes (7340032)",
        ),
        (Options::from(ServerSettings { max_connections: 0, ..defaults() }), "--max-connections must be at least 1"),
        (
            Options::from(ServerSettings { max_admin_connections: 0, ..defaults() }),
            "--max-admin-connections must be at least 1",
        ),
        (
            Options::from(ServerSettings { max_connections_per_ip: 0, ..defaults() }),
            "--max-connections-per-ip must be at least 1",
        ),
        (
            Options::from(ServerSettings { http2_max_concurrent_streams: 0, ..defaults() }),
            "--http2-max-concurrent-streams must be at least 1",
        ),
    ];
    for (opts, want) in cases {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = trainguard::server::metrics::WebhookMetrics::register(&mut registry);
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
