//! Certificate rotation under load and graceful shutdown, on the real server.

use trainguard_binary_support::tls as support;
use trainguard_fake_api::wait::{eventually_async, eventually_blocking};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use support::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

const UID: &str = "0c0ffee0-1111-4222-8333-444455556666";

/// The leaf certificate a fresh handshake gets.
async fn served_cert(addr: std::net::SocketAddr, cas: &[&str]) -> Vec<u8> {
    let tls = client_tls(cas, rustls::ALL_VERSIONS);
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let conn = TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    conn.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods, reason = "load keeps coming for a while on each certificate (real time)")]
async fn certificates_rotate_under_load_without_a_failed_request() {
    let mut server =
        start(Options::from(ServerSettings { cert_reload_interval: Duration::from_millis(50), ..defaults() })).await;
    let rotations: Vec<_> = (0..3).map(|_| chain()).collect();
    let mut cas: Vec<String> = vec![server.ca_pem.clone()];
    cas.extend(rotations.iter().map(|c| c.ca_cert_pem.clone()));
    let ca_refs: Vec<&str> = cas.iter().map(String::as_str).collect();
    assert_eq!(served_cert(server.addr, &ca_refs).await, der(&server.chain.cert_pem));

    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let rotated = Arc::new(AtomicBool::new(false));
    let body = Arc::new(update_review(UID, trainjob(false, "a"), trainjob(false, "a")));
    let mut workers = Vec::new();
    for worker in 0..6 {
        let (ok, failed, body, rotated) = (ok.clone(), failed.clone(), body.clone(), rotated.clone());
        let tls = client_tls(&ca_refs, rustls::ALL_VERSIONS);
        let url = server.url(VALIDATE);
        workers.push(tokio::spawn(async move {
            // Even workers keep one pooled keep-alive connection; odd ones handshake every time.
            let pooled = client_with(tls.clone(), false);
            while !rotated.load(Ordering::Relaxed) {
                let client = if worker % 2 == 0 { pooled.clone() } else { client_with(tls.clone(), false) };
                let req = http::Request::post(&url)
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(bytes::Bytes::from(body.to_vec())))
                    .unwrap();
                match client.request(req).await {
                    Ok(resp) if resp.status() == 200 => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }

    // Rotate the way the kubelet does, with a broken pair (key of another cert) in between; the
    // load runs until the last rotation is served.
    let dir = server.dir();
    let reloads = async |result: &str| {
        let (_, metrics) = admin_get(server.admin, "/metrics").await;
        let series = format!("trainguard_certificate_reloads_total{{result=\"{result}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(series.as_str())?.parse::<usize>().ok()).unwrap_or(0)
    };
    for (i, next) in rotations.iter().enumerate() {
        // Load on the current certificate for a while (real time: requests keep coming).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mismatched = trainguard::certgen::GeneratedChain { key_pem: chain().key_pem, ..next.clone() };
        write_secret_volume(&dir, &mismatched, 100 + i as u32);
        eventually_async("the broken pair seen and refused", async || reloads("error").await > i).await;
        write_secret_volume(&dir, next, 2 + i as u32);
        eventually_async(&format!("rotation {i} served"), async || {
            served_cert(server.addr, &ca_refs).await == der(&next.cert_pem)
        })
        .await;
    }
    rotated.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert_eq!(failed, 0, "{failed} requests failed during rotation ({ok} succeeded)");
    eprintln!("measured: {ok} requests during the rotations");
    assert!(ok > 100, "too little load to mean anything: {ok}");

    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    assert!(metrics.contains("trainguard_certificate_reloads_total{result=\"success\"} 3"), "{metrics}");
    assert!(metrics.contains("trainguard_certificate_reloads_total{result=\"error\"} 3"), "{metrics}");
    server.shutdown().await;
}

/// Opens a TLS connection and sends a request whose body is held back after `sent` bytes.
async fn start_slow_request(
    addr: std::net::SocketAddr,
    ca: &str,
    body: &[u8],
    sent: usize,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tls = client_tls(&[ca], rustls::ALL_VERSIONS);
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut conn = TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    let head = format!(
        "POST {VALIDATE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&body[..sent]).await.unwrap();
    conn.flush().await.unwrap();
    conn
}

async fn read_response(conn: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut chunk)).await.expect("answer").unwrap();
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if n == 0 || text.contains("}}") {
            return text.into_owned();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_requests_finish_and_idle_connections_close_on_shutdown() {
    let mut server =
        start(Options::from(ServerSettings { drain_delay: Duration::from_millis(300), ..defaults() })).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "b"));

    // An idle keep-alive connection that already served one request.
    let mut idle = start_slow_request(server.addr, &server.ca_pem, &body, body.len()).await;
    let first = read_response(&mut idle).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(!first.to_ascii_lowercase().contains("connection: close"), "{first}");
    // Requests in flight: headers and half the body sent.
    let mut in_flight = Vec::new();
    for _ in 0..4 {
        in_flight.push(start_slow_request(server.addr, &server.ca_pem, &body, body.len() / 2).await);
    }
    let admin = server.admin;
    eventually_async("the five connections taken in", async || {
        admin_get(admin, "/metrics").await.1.contains(r#"trainguard_open_connections{listener="webhook"} 5"#)
    })
    .await;

    let addr = server.addr;
    let running = server.running.take().unwrap();
    let shutdown_at = tokio::time::Instant::now();
    let shutdown = tokio::spawn(running.shutdown());
    let mut text = String::new();
    eventually_async("readiness false once shutdown starts", async || {
        let status;
        (status, text) = admin_get(admin, "/readyz").await;
        status == 503
    })
    .await;
    assert!(text.contains("shutting down"), "{text}");
    // During the drain delay new connections are still served, and each HTTP/1.1 answer says
    // `Connection: close`: the client closes the connection, rather than the server closing it
    // under a request the client is just writing.
    let late = post_json(&client(&server.ca_pem, false), &server.url(VALIDATE), &body).await;
    assert_eq!(late.status, 200);
    let mut raw = start_slow_request(server.addr, &server.ca_pem, &body, body.len()).await;
    let answer = read_response(&mut raw).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");

    // Past the 300 ms drain delay (real time: the listener's own timer), with some headroom.
    tokio::time::sleep_until(shutdown_at + Duration::from_millis(400)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "still accepting after the drain delay");
    for conn in in_flight.iter_mut() {
        conn.write_all(&body[body.len() / 2..]).await.unwrap();
        conn.flush().await.unwrap();
    }
    for mut conn in in_flight {
        let text = read_response(&mut conn).await;
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains(UID), "{text}");
    }
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(2), idle.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "idle keep-alive connection was not closed");
    let report = tokio::time::timeout(Duration::from_secs(5), shutdown).await.expect("bounded").unwrap();
    assert_eq!(report.connections_cut, 0);
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let c = chain();
    std::fs::write(dir.path().join("tls.crt"), &c.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &c.key_pem).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_trainguard"))
        .args(["--log-format", "json", "serve", "--offline", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0"])
        .args(["--drain-delay", "300ms", "--shutdown-grace", "5s"])
        .arg("--tls-cert")
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.path().join("tls.key"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let stderr = tokio::process::ChildStderr::from_std(child.stderr.take().unwrap()).unwrap();
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let (addr, admin) = loop {
            let line =
                tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await.unwrap().unwrap().unwrap();
            let log: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("--log-format json wrote a non-JSON line ({e}): {line}"));
            if log["message"] == "trainguard webhook serving" {
                let parse = |k: &str| log[k].as_str().unwrap().parse::<std::net::SocketAddr>().unwrap();
                break (parse("webhook_addr"), parse("admin_addr"));
            }
        };
        trainguard::server::tls::install_default_provider();
        let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
        let mut pending = start_slow_request(addr, &c.ca_cert_pem, &body, 10).await;
        let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        assert!(status.success());
        eventually_async("unready after SIGTERM", async || admin_get(admin, "/readyz").await.0 == 503).await;
        pending.write_all(&body[10..]).await.unwrap();
        let text = read_response(&mut pending).await;
        assert!(text.starts_with("HTTP/1.1 200") && text.contains(UID), "{text}");
        // The process drains its logs and exits by itself.
        while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await.unwrap() {}
    });
    let mut exit = None;
    eventually_blocking("the exit after SIGTERM", || {
        exit = child.try_wait().unwrap();
        exit.is_some()
    });
    assert!(exit.unwrap().success(), "{exit:?}");
}
