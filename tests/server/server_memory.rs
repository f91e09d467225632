//! Memory under hostile uploads, measured on the real binary: 110 clients each send 4 MiB of a
//! body that never finishes, and reconnect whenever the server answers or closes. The server's
//! peak RSS (`VmHWM` in /proc) must stay under 256 MiB, where unbounded buffering would need
//! ~450 MiB, and a normal review on another connection must still be answered in under 2 s.
//! Loopback only; about 5 s (the first 429 comes after the server's 3 s budget wait).

use trainguard_binary_support::tls as support;
use trainguard_fake_api::wait::{eventually, eventually_async};

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

const UPLOADS: usize = 110;
const SENT: usize = 4 << 20;
const UID: &str = "0c6f8a8e-1d1b-4a7e-9a55-0000000000aa";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// (VmRSS, VmHWM) of `pid`, in MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} missing from /proc/{pid}/status"))
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Requests answered 429, from a scrape of `/metrics`.
fn throttled(metrics: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with("controller_runtime_webhook_requests_total") && l.contains(r#"code="429""#))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or(0)
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One hostile client: announce 4 MiB + 1, send 4 MiB, never the last byte; start over when
/// the server answers or closes.
#[allow(clippy::disallowed_methods, reason = "reconnects after a refused connect, at a real-time pace")]
async fn hostile(port: u16, tls: Arc<rustls::ClientConfig>, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) {
    let chunk = vec![b' '; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        let Ok(tcp) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(mut conn) = TlsConnector::from(tls.clone()).connect("localhost".try_into().unwrap(), tcp).await else {
            continue;
        };
        let head = format!(
            "POST {VALIDATE}?timeout=30s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            SENT + 1
        );
        if conn.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let mut written = 0;
        while written < SENT && !stop.load(Ordering::Relaxed) {
            // A write blocks while the server is not reading (back-pressure); the stop flag is
            // checked between bounded waits.
            match tokio::time::timeout(Duration::from_millis(200), conn.write_all(&chunk)).await {
                Ok(Ok(())) => {
                    written += chunk.len();
                    sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                Ok(Err(_)) => break,
                Err(_) => {}
            }
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), conn.flush()).await;
        // Stall: wait for an answer (a 429 or the deadline) or the end of the test.
        let mut buf = [0u8; 1024];
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match tokio::time::timeout(Duration::from_millis(200), conn.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => break, // answered: start over, as a retrying client would
                Err(_) => {}
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods, reason = "RSS sampling and spreading reviews over memory pressure are real time")]
async fn slow_large_uploads_keep_rss_bounded_and_reviews_prompt() {
    trainguard::server::tls::install_default_provider();
    let dir = tempfile::tempdir().unwrap();
    let chain = chain();
    write_secret_volume(dir.path(), &chain, 1);
    let (port, admin) = (free_port(), free_port());
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_trainguard"))
            .args(["serve", "--offline", "--bind", &format!("127.0.0.1:{port}")])
            .args(["--admin-bind", &format!("127.0.0.1:{admin}")])
            // All clients share 127.0.0.1 here; the per-address cap would refuse most uploads
            // (what it is for), and this test is about the body budget holding memory.
            .args(["--max-connections-per-ip", "512"])
            .arg("--tls-cert")
            .arg(dir.path().join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.path().join("tls.key"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("trainguard starts"),
    );
    let pid = server.0.id();
    eventually_async("the server listening", async || {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
    })
    .await;
    let (idle_rss, _) = rss_mib(pid);

    let tls = Arc::new(client_tls(&[&chain.ca_cert_pem], rustls::ALL_VERSIONS));
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    // VmHWM is kept by the kernel but can lag behind; sampling VmRSS too gives the larger peak.
    let sampled_peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, sampled_peak) = (stop.clone(), sampled_peak.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let (rss, _) = rss_mib(pid);
                sampled_peak.fetch_max((rss * 1024.0) as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let clients: Vec<_> =
        (0..UPLOADS).map(|_| tokio::spawn(hostile(port, tls.clone(), stop.clone(), sent.clone()))).collect();

    // Let the uploads fill whatever the server will take: until the clients wrote more than the
    // budget and the first 429s came (what the asserts below require of the pressure).
    let admin_addr: std::net::SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    eventually("more than the budget written", || sent.load(Ordering::Relaxed) > 64 << 20).await;
    eventually_async("a first 429", async || throttled(&admin_get(admin_addr, "/metrics").await.1) > 0).await;
    let https = client(&chain.ca_cert_pem, false);
    let url = format!("https://localhost:{port}{VALIDATE}");
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        let asked = Instant::now();
        let reply = tokio::time::timeout(Duration::from_secs(10), post_json(&https, &url, &body))
            .await
            .expect("a normal review is answered while the uploads press");
        slowest = slowest.max(asked.elapsed());
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.json()["response"]["uid"], UID);
        // Spread the reviews over the pressure rather than sending them back to back.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (rss, _) = rss_mib(pid);
    let (_, metrics) = admin_get(admin_addr, "/metrics").await;
    let held = metrics
        .lines()
        .find_map(|l| l.strip_prefix("trainguard_inflight_body_bytes "))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("trainguard_inflight_body_bytes exported")
        / (1 << 20) as f64;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.await;
    }
    sampler.await.unwrap();
    let (_, hwm) = rss_mib(pid);
    let peak = hwm.max(sampled_peak.load(Ordering::Relaxed) as f64 / 1024.0);
    let sent_mib = sent.load(Ordering::Relaxed) as f64 / (1 << 20) as f64;
    let throttled = throttled(&metrics);
    // The figures docs/benchmarks.md quotes; `--nocapture` shows them.
    eprintln!(
        "{UPLOADS} uploads of 4 MiB: idle RSS {idle_rss:.1} MiB, RSS under pressure {rss:.1} MiB, peak (VmHWM or \
         sampled VmRSS) {peak:.1} MiB; body budget held {held:.1} MiB; clients wrote {sent_mib:.0} MiB; slowest normal review {slowest:?}; 429 answers {throttled}"
    );
    assert!(peak <= 256.0, "peak RSS {peak:.1} MiB over 256 MiB");
    assert!(slowest < Duration::from_secs(2), "a normal review took {slowest:?}");
    // The pressure was real: the uploads were more than the budget, and the server pushed back.
    assert!(sent_mib > 64.0, "the clients wrote only {sent_mib:.0} MiB");
    assert!(throttled > 0, "no upload was answered 429:\n{metrics}");
    assert!(metrics.contains("trainguard_log_lines_dropped_total "), "{metrics}");
}
