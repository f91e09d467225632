//! The real server on loopback over real TLS, with real HTTP/1.1 and HTTP/2 clients.

use trainguard_binary_support::tls as support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

const UID: &str = "7d1e6a52-8b8f-4a55-9f0e-3c1f2a4b5c6d";

#[tokio::test]
async fn verdicts_over_http1_and_http2_echo_the_uid() {
    for http2 in [false, true] {
        let mut server = start(Options::from(ServerSettings { http2, ..defaults() })).await;
        let client = client(&server.ca_pem, http2);
        let want_version = if http2 { http::Version::HTTP_2 } else { http::Version::HTTP_11 };

        // (old suspended, new suspended, old gpu, new gpu) → (allowed, code, rule)
        let cases = [
            (false, false, "a100", "a100", true, 0, "U1"),
            (false, false, "a100", "h100", false, 403, "U2"),
            (true, true, "a100", "h100", true, 0, "allow-gate"),
        ];
        for (i, (old_s, new_s, old_gpu, new_gpu, allowed, code, rule)) in cases.into_iter().enumerate() {
            let uid = format!("{UID}-{i}");
            let body = update_review(&uid, trainjob(old_s, old_gpu), trainjob(new_s, new_gpu));
            let reply = post_json(&client, &server.url(VALIDATE), &body).await;
            assert_eq!(reply.status, 200, "case {i}");
            assert_eq!(reply.version, want_version, "case {i}");
            assert_eq!(reply.content_type, "application/json");
            let review = reply.json();
            let response = &review["response"];
            assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
            assert_eq!(review["kind"], "AdmissionReview");
            assert_eq!(response["uid"], uid.as_str(), "case {i}");
            assert_eq!(response["allowed"], allowed, "case {i}: {review}");
            assert_eq!(response["auditAnnotations"]["trainguard.io/rule"], rule, "case {i}");
            if !allowed {
                assert_eq!(response["status"]["code"], code);
                let message = response["status"]["message"].as_str().unwrap();
                assert!(
                    message.starts_with(
                        "spec.podSpecOverrides: Forbidden: can only be changed while the TrainJob is suspended"
                    ),
                    "{message}"
                );
                assert!(message.contains("JobSet ml-team/llama"), "{message}");
            }
        }
        // Offline: an allowed gated change says the JobSet was not consulted.
        let body = update_review(UID, trainjob(true, "a100"), trainjob(true, "h100"));
        let review = post_json(&client, &server.url(VALIDATE), &body).await.json();
        let warnings = review["response"]["warnings"].as_array().expect("warnings");
        assert!(warnings[0].as_str().unwrap().contains("was not consulted"), "{warnings:?}");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn mutate_returns_a_jsonpatch_on_create() {
    let mut server = start(Options::default()).await;
    let client = client(&server.ca_pem, false);
    let body = serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": UID, "operation": "CREATE", "name": "llama", "namespace": "ml-team",
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "object": {"metadata": {"name": "llama"}, "spec": {"runtimeRef": {"name": "torch"}}}
        }
    }))
    .unwrap();
    let review = post_json(&client, &server.url(MUTATE), &body).await.json();
    let response = &review["response"];
    assert_eq!(response["uid"], UID);
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    use base64::Engine as _;
    let patch_bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("patch is base64 text, as Go's []byte"))
        .unwrap();
    let patch: serde_json::Value = serde_json::from_slice(&patch_bytes).unwrap();
    let paths: Vec<&str> = patch.as_array().unwrap().iter().map(|op| op["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/spec/suspend", "/spec/managedBy", "/spec/runtimeRef/apiGroup", "/spec/runtimeRef/kind"]);
    server.shutdown().await;
}

#[tokio::test]
async fn protocol_failures_get_status_bodies() {
    let mut server = start(Options::from(ServerSettings { max_body_bytes: 64 * 1024, ..defaults() })).await;
    let client = client(&server.ca_pem, false);
    let review = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let big = vec![b' '; 65 * 1024];
    // (method, path, content type, body, status, reason, message fragment)
    type Case<'a> = (&'a str, &'a str, &'a str, Vec<u8>, u16, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        ("POST", VALIDATE, "application/json", b"{not json".to_vec(), 400, "BadRequest", "not valid JSON"),
        (
            "POST",
            VALIDATE,
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            400,
            "BadRequest",
            "has no request",
        ),
        (
            "POST",
            VALIDATE,
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#
                .to_vec(),
            400,
            "BadRequest",
            "no uid",
        ),
        (
            "POST",
            VALIDATE,
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}"#.to_vec(),
            400,
            "BadRequest",
            "admission.k8s.io/v1beta1",
        ),
        (
            "POST",
            "/validate-something-else",
            "application/json",
            review.clone(),
            404,
            "NotFound",
            "no webhook at /validate-something-else",
        ),
        ("GET", VALIDATE, "application/json", Vec::new(), 405, "MethodNotAllowed", "GET is not allowed"),
        ("POST", VALIDATE, "text/plain", review.clone(), 415, "UnsupportedMediaType", "got text/plain"),
        ("POST", VALIDATE, "application/json", big, 413, "RequestEntityTooLarge", "65536 bytes"),
        ("POST", MUTATE, "application/json; charset=utf-8", review.clone(), 200, "", ""),
    ];
    for (method, path, content_type, body, status, reason, fragment) in cases {
        let reply = send(&client, method, &server.url(path), content_type, body).await;
        assert_eq!(reply.status.as_u16(), status, "{method} {path} {content_type}");
        assert_eq!(reply.content_type, "application/json", "{method} {path}");
        let json = reply.json();
        if status == 200 {
            assert_eq!(json["response"]["uid"], UID);
            continue;
        }
        assert_eq!(json["kind"], "Status");
        assert_eq!(json["code"], status);
        assert_eq!(json["reason"], reason);
        let message = json["message"].as_str().unwrap();
        assert!(message.contains(fragment), "{method} {path}: {message}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn http2_is_offered_only_when_enabled() {
    let mut server = start(Options::default()).await;
    let mut tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let conn = TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    assert_eq!(conn.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    server.shutdown().await;
}

#[tokio::test]
async fn tls12_and_tls13_both_work() {
    let mut server = start(Options::default()).await;
    for (version, want) in [
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
    ] {
        let tls = client_tls(&[&server.ca_pem], &[version]);
        let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let conn =
            TlsConnector::from(Arc::new(tls.clone())).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
        assert_eq!(conn.get_ref().1.protocol_version(), Some(want));
        let reply = post_json(
            &client_with(tls, false),
            &server.url(VALIDATE),
            &update_review(UID, trainjob(false, "a"), trainjob(false, "a")),
        )
        .await;
        assert_eq!(reply.status, 200);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let mut server =
        start(Options::from(ServerSettings { header_read_timeout: Duration::from_millis(300), ..defaults() })).await;
    let tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut conn = TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    conn.write_all(format!("POST {VALIDATE} HTTP/1.1\r\nHost: localhost\r\nContent-Ty").as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server kept a header-less connection open for 5s");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "closed before the header timeout: {:?}",
        started.elapsed()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_never_starts_tls_is_cut_off() {
    let mut server =
        start(Options::from(ServerSettings { tls_handshake_timeout: Duration::from_millis(300), ..defaults() })).await;
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "connection still open after the handshake timeout: {read:?}");
    let (_, metrics) = admin_get(server.admin, "/metrics").await;
    let series = r#"trainguard_connections_refused_total{listener="webhook",reason="handshake_timeout"} 1"#;
    assert!(metrics.contains(series), "{series} not in {metrics}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_request_past_its_timeout_gets_a_retryable_denial_before_the_deadline() {
    let mut server = start(Options::default()).await;
    let tls = client_tls(&[&server.ca_pem], rustls::ALL_VERSIONS);
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut conn = TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap();
    // Announce 1000 bytes, send 10: the body cannot arrive before the deadline. The API server's
    // shortest timeout, 1 s (real time: the server's deadline timer): answered at 900 ms.
    conn.write_all(
        format!("POST {VALIDATE}?timeout=1s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"apiVersi")
            .as_bytes(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 8192];
    let n = tokio::time::timeout(Duration::from_secs(3), conn.read(&mut buf)).await.expect("answered").unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(1), "answered after the API server would have given up: {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(800), "answered too early: {elapsed:?}");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains(r#""code":500"#), "{text}");
    assert!(text.contains("retry the request"), "{text}");
    server.shutdown().await;
}

#[tokio::test]
async fn readiness_metrics_and_health_on_the_admin_port() {
    let mut server = start(Options::default()).await;
    assert_eq!(admin_get(server.admin, "/healthz").await.0, 200);
    assert_eq!(admin_get(server.admin, "/readyz").await, (200, "ok\n".to_string()));
    let client = client(&server.ca_pem, false);
    post_json(&client, &server.url(VALIDATE), &update_review(UID, trainjob(false, "a"), trainjob(false, "b"))).await;
    send(&client, "POST", &server.url(VALIDATE), "text/plain", Vec::new()).await;
    let (status, text) = admin_get(server.admin, "/metrics").await;
    assert_eq!(status, 200);
    for line in [
        format!("controller_runtime_webhook_requests_total{{webhook=\"{VALIDATE}\",code=\"200\"}} 1"),
        format!("controller_runtime_webhook_requests_total{{webhook=\"{VALIDATE}\",code=\"415\"}} 1"),
        format!("controller_runtime_webhook_requests_in_flight{{webhook=\"{VALIDATE}\"}} 0"),
        format!(
            "trainguard_admission_decisions_total{{webhook=\"{VALIDATE}\",operation=\"UPDATE\",allowed=\"false\",rule=\"U2\"}} 1"
        ),
        format!("controller_runtime_webhook_latency_seconds_count{{webhook=\"{VALIDATE}\"}} 2"),
    ] {
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    assert!(text.contains("trainguard_certificate_expiry_timestamp_seconds "), "{text}");
    server.shutdown().await;
}

#[tokio::test]
async fn startup_fails_clearly_on_a_bad_certificate() {
    trainguard::server::tls::install_default_provider();
    let dir = tempfile::tempdir().unwrap();
    let a = chain();
    let b = chain();
    let write = |cert: &str, key: &str| {
        std::fs::write(dir.path().join("tls.crt"), cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), key).unwrap();
    };
    let cases: Vec<(String, String, &str)> = vec![
        (a.cert_pem.clone(), b.key_pem.clone(), "does not belong to the certificate"),
        ("garbage".into(), a.key_pem.clone(), "no PEM certificate found"),
        (a.cert_pem.clone(), "garbage".into(), "no usable PEM private key"),
    ];
    for (cert, key, want) in cases {
        write(&cert, &key);
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = trainguard::server::metrics::WebhookMetrics::register(&mut registry);
        let err = trainguard::server::start(
            settings_for(dir.path(), &Options::default()),
            Arc::new(trainguard::cluster::Offline),
            None,
            metrics,
            Arc::new(registry),
        )
        .await
        .err()
        .expect("must not start");
        assert!(err.to_string().contains(want), "{err}");
    }
}

/// A certificate that expired before the server started is served (there is no other), but
/// `/readyz` fails and says why, so the replica gets no traffic and a rollout stops on it.
#[tokio::test]
async fn an_expired_certificate_at_start_is_not_ready() {
    trainguard::server::tls::install_default_provider();
    let dir = tempfile::tempdir().unwrap();
    let now = time::OffsetDateTime::now_utc();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_before = now - time::Duration::hours(2);
    params.not_after = now - time::Duration::hours(1);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = trainguard::server::metrics::WebhookMetrics::register(&mut registry);
    let running = trainguard::server::start(
        settings_for(dir.path(), &Options::default()),
        Arc::new(trainguard::cluster::Offline),
        None,
        metrics,
        Arc::new(registry),
    )
    .await
    .expect("starts with the only pair there is");
    let (status, body) = admin_get(running.admin_addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("serving certificate expired"), "{body}");
    running.shutdown().await;
}

/// A client CA (PEM) and a client certificate for `kube-apiserver` it signed.
fn client_ca_and_identity() -> (String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["kube-apiserver".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), vec![cert.der().clone()], PrivateKeyDer::Pkcs8(key.serialize_der().into()))
}

#[tokio::test]
async fn client_ca_requires_a_client_certificate_signed_by_it() {
    let (client_ca, good_chain, good_key) = client_ca_and_identity();
    let (_, other_chain, other_key) = client_ca_and_identity();
    let ca_dir = tempfile::tempdir().unwrap();
    let ca_path = ca_dir.path().join("client-ca.crt");
    std::fs::write(&ca_path, &client_ca).unwrap();
    let mut server = start(Options::from(ServerSettings { client_ca: Some(ca_path), ..defaults() })).await;
    let body = update_review(UID, trainjob(false, "a"), trainjob(false, "a"));
    let roots = root_store(&[&server.ca_pem]);
    let builder = || {
        rustls::ClientConfig::builder_with_provider(trainguard::server::tls::provider())
            .with_protocol_versions(rustls::ALL_VERSIONS)
            .unwrap()
            .with_root_certificates(roots.clone())
    };
    let cases = [
        ("no client certificate", builder().with_no_client_auth(), false),
        ("signed by another CA", builder().with_client_auth_cert(other_chain, other_key).unwrap(), false),
        ("signed by --client-ca", builder().with_client_auth_cert(good_chain, good_key).unwrap(), true),
    ];
    for (what, tls, served) in cases {
        let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let status = match TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await {
            Ok(mut conn) => http1_post(&mut conn, VALIDATE, &body, Duration::from_secs(5)).await.0,
            Err(_) => 0,
        };
        assert_eq!(status == 200, served, "{what}: HTTP {status}");
    }
    server.shutdown().await;

    // A --client-ca without a certificate in it is refused at start.
    let empty = ca_dir.path().join("empty.crt");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let opts = Options::from(ServerSettings { client_ca: Some(empty), ..defaults() });
    let dir = tempfile::tempdir().unwrap();
    write_secret_volume(dir.path(), &chain(), 1);
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = trainguard::server::metrics::WebhookMetrics::register(&mut registry);
    let started = trainguard::server::start(
        settings_for(dir.path(), &opts),
        opts.cluster.clone(),
        None,
        metrics,
        Arc::new(registry),
    )
    .await;
    let error = started.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("no usable CA certificate for client authentication"), "{error}");
}
