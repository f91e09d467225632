//! What one pod can send, against the real server over TLS on loopback: a review whose answer
//! would be hundreds of megabytes, clients that never read their answers (HTTP/1.1 and HTTP/2),
//! idle keep-alive connections from many addresses holding every slot, and the per-address cap
//! against a client that presents the API server's client certificate.
//!
//! Attackers use 127.0.0.1 and 127.0.0.3; the well-behaved client comes from 127.0.0.2.

use trainguard_binary_support::tls as support;
use trainguard_fake_api::wait::eventually_async;
use trainguard_test_support::payloads;

use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;
use tokio::io::AsyncWriteExt;

const UID: &str = "0c6f8a8e-1d1b-4a7e-9a55-0000000000b1";

/// `trainguard_open_connections{listener="webhook"}`, scraped.
async fn open_webhook_connections(server: &TestServer) -> Option<u64> {
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    metrics
        .lines()
        .find(|l| l.starts_with(r#"trainguard_open_connections{listener="webhook"}"#))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_of_millions_of_bad_items_gets_a_small_answer() {
    // 3.5 M items in 7 MiB: one error and one cause per item was a 472 MB answer.
    let mut server = start(Options::from(ServerSettings { max_body_bytes: 7 << 20, ..defaults() })).await;
    let body = payloads::create_with_bad_items(3_500_000);
    assert!(body.len() < 7 << 20, "{} bytes", body.len());
    let started = Instant::now();
    let reply = post_json(&client(&server.ca_pem, false), &server.url(VALIDATE), &body).await;
    eprintln!("measured: 7 MiB review of bad items answered in {:?}, {} bytes", started.elapsed(), reply.body.len());
    assert_eq!(reply.status, 200);
    assert!(reply.body.len() < 64 * 1024, "answer of {} bytes", reply.body.len());
    let review = reply.json();
    let status = &review["response"]["status"];
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(status["code"], 422, "{status}");
    let causes = status["details"]["causes"].as_array().expect("causes");
    assert_eq!(causes.len(), 50, "the first 50 errors are kept");
    let message = status["message"].as_str().unwrap();
    assert!(message.len() < 1024, "{message}");
    assert!(message.contains("more errors]"), "{message}");
    assert!(message.contains("holds more than 100000 JSON values"), "{message}");
    server.shutdown().await;
}

/// Writes `requests` copies of `request` on `conn` until a write blocks for a second (the server
/// stopped reading because its answers are not read): how many went out.
async fn pipeline_until_blocked<S: tokio::io::AsyncWrite + Unpin>(
    conn: &mut S,
    request: &[u8],
    requests: usize,
) -> usize {
    for sent in 0..requests {
        match tokio::time::timeout(Duration::from_secs(1), conn.write_all(request)).await {
            Ok(Ok(())) => {}
            _ => return sent,
        }
    }
    requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_answers_is_dropped() {
    let write_timeout = Duration::from_secs(1);
    let mut server = start(Options::from(ServerSettings { write_timeout, ..defaults() })).await;
    // Pipelined reviews whose ~8 KB denials are never read: the socket buffers fill, the server's
    // write blocks, and without a write deadline the connection (and its answers) stays forever
    // (the idle timeout here is the default 120 s, and a closing connection waits for its write).
    let body = payloads::create_with_bad_items(60);
    let mut request = format!(
        "POST {VALIDATE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let tcp = socket.connect(server.addr).await.unwrap();
    let tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    let mut conn =
        tokio_rustls::TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    let sent = pipeline_until_blocked(&mut conn, &request, 20_000).await;
    assert!(sent < 20_000, "the server kept reading: its answers never blocked");
    let blocked = Instant::now();
    eventually_async("the connection that reads nothing is dropped", async || {
        open_webhook_connections(&server).await == Some(0)
    })
    .await;
    eprintln!(
        "measured: a client that stopped reading after {sent} requests was dropped {:?} later",
        blocked.elapsed()
    );
    // Another client is served.
    let mut other = tls_from("127.0.0.2", server.addr, &server.ca_pem, &[b"http/1.1"]).await;
    let ok = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    assert_eq!(http1_post(&mut other, VALIDATE, &ok, Duration::from_secs(5)).await.0, 200);
    drop(conn);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_whose_answer_is_never_read_does_not_hold_the_connection() {
    let mut server = start(Options::from(ServerSettings {
        http2: true,
        idle_timeout: Duration::from_millis(400),
        write_timeout: Duration::from_secs(1),
        ..defaults()
    }))
    .await;
    let mut tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let conn =
        tokio_rustls::TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    // A 1 KiB stream window that is never replenished: the ~8 KB answer cannot be sent whole.
    let (send, connection) =
        h2::client::Builder::new().initial_window_size(1024).handshake::<_, bytes::Bytes>(conn).await.unwrap();
    let connection = tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let request = http::Request::post(format!("https://localhost{VALIDATE}"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (response, mut stream) = send.send_request(request, false).unwrap();
    stream.send_data(payloads::create_with_bad_items(60).into(), true).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), response).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let _unread = response.into_body();
    // The server goes idle (400 ms), asks the connection to close, and drops it when the stream
    // still has not been sent a write timeout later.
    let ended = tokio::time::timeout(Duration::from_secs(8), connection).await;
    assert!(ended.is_ok(), "the connection with an unsendable answer is still open");
    assert_eq!(open_webhook_connections(&server).await, Some(0));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_bounds_are_pinned() {
    use trainguard::server::conn::http2;
    // Rapid Reset and friends: hyper's defaults are pinned by our own constants.
    let cases: [(&str, usize, usize); 3] = [
        ("send buffer per stream", http2::MAX_SEND_BUF, 64 * 1024),
        ("pending accept resets", http2::MAX_PENDING_RESETS, 20),
        ("local error resets", http2::MAX_LOCAL_ERROR_RESETS, 64),
    ];
    for (what, got, want) in cases {
        assert_eq!(got, want, "{what}");
    }
    // A peer that resets every stream it opens is cut off: the connection ends with GOAWAY.
    let mut server = start(Options::from(ServerSettings { http2: true, ..defaults() })).await;
    let mut tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let conn =
        tokio_rustls::TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    let (send, connection) = h2::client::handshake(conn).await.unwrap();
    let connection = tokio::spawn(connection);
    let mut refused = false;
    for _ in 0..2_000 {
        let Ok(mut ready) = send.clone().ready().await else {
            refused = true;
            break;
        };
        let request = http::Request::post(format!("https://localhost{VALIDATE}"))
            .header("content-type", "application/json")
            .body(())
            .unwrap();
        match ready.send_request(request, false) {
            Ok((_, mut stream)) => stream.send_reset(h2::Reason::CANCEL),
            Err(_) => {
                refused = true;
                break;
            }
        }
    }
    let ended = refused || tokio::time::timeout(Duration::from_secs(5), connection).await.is_ok();
    assert!(ended, "2,000 streams opened and reset at once were all accepted");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods, reason = "the idle floor is real time, and what is tested")]
async fn idle_connections_make_room_for_a_new_client_at_the_cap() {
    // The attack scaled down: 2 addresses × 4 keep-alive connections fill a cap of 8, each after
    // one request, then idle (the idle timeout is 120 s).
    let evict_idle_after = Duration::from_millis(300);
    let mut server = start(Options::from(ServerSettings {
        max_connections: 8,
        max_connections_per_ip: 4,
        evict_idle_after,
        ..defaults()
    }))
    .await;
    let ok = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let mut idle = Vec::new();
    for source in ["127.0.0.1", "127.0.0.3"] {
        for _ in 0..4 {
            let mut conn = tls_from(source, server.addr, &server.ca_pem, &[b"http/1.1"]).await;
            assert_eq!(http1_post(&mut conn, VALIDATE, &ok, Duration::from_secs(5)).await.0, 200);
            idle.push(conn);
        }
    }
    // Past the floor, a new client is served: the connection idle the longest made room. (A
    // sleep: the floor is real time, and what is tested.)
    tokio::time::sleep(evict_idle_after).await;
    let started = Instant::now();
    let mut conn = tls_from("127.0.0.2", server.addr, &server.ca_pem, &[b"http/1.1"]).await;
    let (status, text) = http1_post(&mut conn, VALIDATE, &ok, Duration::from_secs(5)).await;
    assert_eq!(status, 200, "{text}");
    eprintln!("measured: a new client at a cap held by idle connections answered in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(2), "answered in {:?}", started.elapsed());
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let series = r#"trainguard_connections_refused_total{listener="webhook",reason="evicted_idle"} 1"#;
    assert!(metrics.contains(series), "{series} not in {metrics}");
    let mut closed = 0;
    for conn in &mut idle {
        if closes_within(conn, Duration::from_millis(200)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 1, "one idle connection closed to make room, the others kept");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_in_use_is_not_evicted_before_the_floor() {
    // The floor (10 s as shipped) keeps connections in active use: a client that just got its
    // answer is not cut. Here the floor is 30 s and the cap is full of freshly used connections:
    // the new client waits in the backlog (back-pressure), as before.
    let mut server = start(Options::from(ServerSettings {
        max_connections: 2,
        max_connections_per_ip: 2,
        evict_idle_after: Duration::from_secs(30),
        ..defaults()
    }))
    .await;
    let ok = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let mut used = Vec::new();
    for _ in 0..2 {
        let mut conn = tls_from("127.0.0.1", server.addr, &server.ca_pem, &[b"http/1.1"]).await;
        assert_eq!(http1_post(&mut conn, VALIDATE, &ok, Duration::from_secs(5)).await.0, 200);
        used.push(conn);
    }
    let tcp = connect_from("127.0.0.2", server.addr).await;
    let tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    let handshake = tokio_rustls::TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), handshake).await.is_err(),
        "a connection idle for less than the floor was closed to make room"
    );
    for (i, conn) in used.iter_mut().enumerate() {
        assert_eq!(http1_post(conn, VALIDATE, &ok, Duration::from_secs(5)).await.0, 200, "connection {i} kept");
    }
    server.shutdown().await;
}

/// With `--client-ca`, a connection that presents a certificate the CA signed (the API server's)
/// gives its address's slot back once the handshake is done: however many calls come from one
/// address (a konnectivity agent), `--max-connections-per-ip` never refuses them. A client without
/// a certificate is refused in the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_address_cap_never_refuses_an_authenticated_client() {
    use rustls_pki_types::PrivateKeyDer;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["kube-apiserver".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let ca_dir = tempfile::tempdir().unwrap();
    let ca_path = ca_dir.path().join("client-ca.crt");
    std::fs::write(&ca_path, ca.pem()).unwrap();
    let mut server =
        start(Options::from(ServerSettings { client_ca: Some(ca_path), max_connections_per_ip: 2, ..defaults() }))
            .await;
    let identity = rustls::ClientConfig::builder_with_provider(trainguard::server::tls::provider())
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .unwrap()
        .with_root_certificates(root_store(&[&server.ca_pem]))
        .with_client_auth_cert(vec![cert.der().clone()], PrivateKeyDer::Pkcs8(key.serialize_der().into()))
        .unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(identity));
    let ok = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    // Six keep-alive connections from one address, three times its cap, all held open.
    let mut held = Vec::new();
    for i in 0..6 {
        let tcp = connect_from("127.0.0.1", server.addr).await;
        let mut conn = connector.connect("localhost".try_into().unwrap(), tcp).await.expect("handshake");
        let (status, text) = http1_post(&mut conn, VALIDATE, &ok, Duration::from_secs(5)).await;
        assert_eq!(status, 200, "connection {i}: {text}");
        held.push(conn);
    }
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    assert!(!metrics.contains(r#"reason="per_ip_cap"} "#), "{metrics}");
    server.shutdown().await;
}
