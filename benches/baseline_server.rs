//! The ceiling for any webhook on this machine: bare hyper + rustls, same TLS configuration as
//! trainguard and the same HTTP/2 tuning (windows, stream limit, header-list limit), reading the
//! whole body and answering a fixed AdmissionReview. `benches/load.py` runs it beside trainguard.
//!
//! With `--echo-uid` it answers with the request's own uid, as the API server requires of a
//! registered webhook (`benches/e2e_latency.py` registers it beside trainguard on the local control
//! plane); without it the answer is a fixed byte string, the cheapest possible.
//!
//! Usage: baseline_server ADDR CERT KEY [--http2] [--echo-uid]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark: a panic is its failure report")]

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use trainguard::server::conn::http2 as tuned;

const ANSWER: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"2b9a1c5e-7d0f-4c1a-9e55-3f7d8a4b1c20","allowed":true,"status":{}}}"#;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (addr, cert, key) = (&args[1], &args[2], &args[3]);
    let http2 = args.iter().any(|a| a == "--http2");
    let echo_uid = args.iter().any(|a| a == "--echo-uid");
    trainguard::server::tls::install_default_provider();
    let (pair, _, _) = trainguard::server::tls::load_pair(cert.as_ref(), key.as_ref()).expect("certificate");
    let live = Arc::new(arc_swap::ArcSwap::new(pair.certified));
    let acceptor = TlsAcceptor::from(trainguard::server::tls::server_config(live, http2, None));
    let listener = TcpListener::bind(addr).await.expect("bind");
    eprintln!("baseline listening on {addr} (http2: {http2})");
    loop {
        let (tcp, _) = listener.accept().await.expect("accept");
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| async move {
                let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                let answer = if echo_uid { echoed(&body) } else { Bytes::from_static(ANSWER) };
                std::hint::black_box(body.len());
                Ok::<_, Infallible>(
                    hyper::Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(answer))
                        .unwrap(),
                )
            });
            let io = TokioIo::new(tls);
            let _ = if h2 {
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .initial_stream_window_size(tuned::STREAM_WINDOW)
                    .initial_connection_window_size(tuned::CONNECTION_WINDOW)
                    .max_concurrent_streams(128)
                    .max_header_list_size(tuned::MAX_HEADER_LIST)
                    .serve_connection(io, service)
                    .await
            } else {
                hyper::server::conn::http1::Builder::new().serve_connection(io, service).await
            };
        });
    }
}

/// "allowed" for the review's own uid (only `request.uid` is decoded).
fn echoed(body: &[u8]) -> Bytes {
    #[derive(serde::Deserialize)]
    struct Review<'a> {
        #[serde(borrow)]
        request: Request<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        uid: &'a str,
    }
    let uid = serde_json::from_slice::<Review<'_>>(body).map(|r| r.request.uid).unwrap_or_default();
    let answer = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true},
    });
    Bytes::from(answer.to_string())
}
