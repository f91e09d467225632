//! `trainguard certs` as a user runs it: the files it writes, the chain, the names, and a real TLS
//! handshake on 127.0.0.1 by a client that trusts only the generated CA.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use prometheus_client::registry::Registry;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use trainguard::cluster::Offline;
use trainguard::server::ServerSettings;
use trainguard::server::metrics::WebhookMetrics;
use trainguard_core::admission::{Endpoint, RulesConfig};
use x509_parser::extensions::GeneralName;

const SERVICE: &str = "guard";
const NAMESPACE: &str = "ops";

fn certs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainguard"))
        .arg("certs")
        .args(args)
        .env_remove("TRAINGUARD_OUT")
        .output()
        .expect("running trainguard certs")
}

fn generate(dir: &Path, extra: &[&str]) -> Output {
    let out = dir.to_str().unwrap();
    let mut args = vec!["--service", SERVICE, "--namespace", NAMESPACE, "--out", out, "--days", "30"];
    args.extend_from_slice(extra);
    certs(&args)
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("reading {name}: {e}"))
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM certificate")
}

fn roots(ca_pem: &str) -> Arc<RootCertStore> {
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        store.add(cert.unwrap()).unwrap();
    }
    Arc::new(store)
}

fn fresh() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    let out = generate(&dir, &[]);
    assert!(out.status.success(), "trainguard certs failed: {}", String::from_utf8_lossy(&out.stderr));
    (tmp, dir)
}

#[test]
fn writes_every_file_with_private_ones_readable_by_owner_only() {
    let (_tmp, dir) = fresh();
    let cases = [
        ("ca.crt", 0o644),
        ("ca.key", 0o600),
        ("tls.crt", 0o644),
        ("tls.key", 0o600),
        ("secret.yaml", 0o600),
        ("cabundle-patch.yaml", 0o644),
        ("kustomization.yaml", 0o644),
        (".gitignore", 0o644),
    ];
    for (name, mode) in cases {
        let meta = std::fs::metadata(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(meta.permissions().mode() & 0o777, mode, "{name}");
    }
    assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700, "directory");
    assert!(read(&dir, ".gitignore").lines().any(|l| l == "*"), "the directory ignores itself in git");
}

#[test]
fn serving_certificate_names_the_service_and_is_signed_by_the_ca() {
    let (_tmp, dir) = fresh();
    let ca_der = der(&read(&dir, "ca.crt"));
    let leaf_der = der(&read(&dir, "tls.crt"));
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
    let (_, leaf) = x509_parser::parse_x509_certificate(&leaf_der).unwrap();

    assert!(ca.is_ca(), "ca.crt is a CA");
    assert!(!leaf.is_ca(), "tls.crt is not a CA");
    assert_eq!(leaf.issuer(), ca.subject());
    let sans: Vec<String> = leaf
        .subject_alternative_name()
        .unwrap()
        .expect("a SAN extension")
        .value
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(d) => d.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(sans, ["guard.ops.svc", "guard.ops.svc.cluster.local"]);
    let eku = leaf.extended_key_usage().unwrap().expect("extended key usage").value;
    assert!(eku.server_auth, "serverAuth usage");

    // --days 30: valid from about now (an hour back for clock skew) for 30 days.
    let days = (leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp()) as f64 / 86400.0;
    assert!((30.0..30.1).contains(&days), "validity {days} days");
    assert_eq!(ca.validity().not_after, leaf.validity().not_after);
}

#[test]
fn chain_verifies_for_the_service_names_only() {
    let (_tmp, dir) = fresh();
    let (_tmp2, other) = fresh();
    let leaf = der(&read(&dir, "tls.crt"));
    let now = UnixTime::now();
    let cases = [
        ("guard.ops.svc", read(&dir, "ca.crt"), true),
        ("guard.ops.svc.cluster.local", read(&dir, "ca.crt"), true),
        ("guard.other.svc", read(&dir, "ca.crt"), false),
        ("guard", read(&dir, "ca.crt"), false),
        ("guard.ops.svc", read(&other, "ca.crt"), false),
    ];
    for (name, ca_pem, ok) in cases {
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            roots(&ca_pem),
            Arc::new(ring::default_provider()),
        )
        .build()
        .unwrap();
        let server_name = ServerName::try_from(name).unwrap();
        let got = verifier.verify_server_cert(&leaf, &[], &server_name, &[], now);
        assert_eq!(got.is_ok(), ok, "{name}: {got:?}");
    }
}

async fn handshake(dir: &Path, trust_ca_pem: &str, sni: &str) -> Result<Vec<u8>, String> {
    let provider = Arc::new(ring::default_provider());
    let cert_chain = vec![der(&read(dir, "tls.crt"))];
    let key = PrivateKeyDer::from_pem_slice(read(dir, "tls.key").as_bytes()).unwrap();
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(cert_chain, key)
        .unwrap();
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(trust_ca_pem))
        .with_no_client_auth();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let server_task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut tls = acceptor.accept(tcp).await.map_err(|e| format!("server: {e}"))?;
        let mut buf = [0u8; 4];
        tls.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
        tls.write_all(b"pong").await.map_err(|e| e.to_string())?;
        tls.shutdown().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(())
    });

    let client_side = async {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = ServerName::try_from(sni.to_string()).map_err(|e| e.to_string())?;
        let mut tls =
            TlsConnector::from(Arc::new(client)).connect(name, tcp).await.map_err(|e| format!("client: {e}"))?;
        tls.write_all(b"ping").await.map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        tls.read_to_end(&mut reply).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(reply)
    };
    let result = tokio::time::timeout(Duration::from_secs(10), client_side).await.expect("handshake hung");
    server_task.abort();
    result
}

#[tokio::test]
async fn client_trusting_only_the_ca_completes_a_handshake_for_the_service() {
    let (_tmp, dir) = fresh();
    let (_tmp2, other) = fresh();
    let cases = [
        ("guard.ops.svc", read(&dir, "ca.crt"), Ok(b"pong".to_vec())),
        ("guard.ops.svc.cluster.local", read(&dir, "ca.crt"), Ok(b"pong".to_vec())),
        ("guard.default.svc", read(&dir, "ca.crt"), Err("certificate not valid for name \"guard.default.svc\"")),
        // Another run's CA has the same subject, so the client finds it and rejects the signature.
        ("guard.ops.svc", read(&other, "ca.crt"), Err("invalid peer certificate: BadSignature")),
    ];
    for (sni, ca, want) in cases {
        let got = handshake(&dir, &ca, sni).await;
        match (&got, want) {
            (Ok(reply), Ok(expected)) => assert_eq!(reply, &expected, "{sni}"),
            (Err(e), Err(reason)) => assert!(e.contains(reason), "{sni}: {e}"),
            _ => panic!("{sni}: got {got:?}"),
        }
    }
}

#[test]
fn secret_manifest_holds_the_same_files() {
    let (_tmp, dir) = fresh();
    let text = read(&dir, "secret.yaml");
    let secret: Secret = serde_saphyr::from_str(&text).expect("secret.yaml is a Secret");
    assert_eq!(secret.metadata.name.as_deref(), Some("trainguard-tls"));
    assert_eq!(secret.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data: BTreeMap<String, String> =
        secret.data.unwrap().into_iter().map(|(k, ByteString(v))| (k, String::from_utf8(v).unwrap())).collect();
    let want: BTreeMap<String, String> =
        ["ca.crt", "tls.crt", "tls.key"].iter().map(|f| (f.to_string(), read(&dir, f))).collect();
    assert_eq!(data, want);
}

/// `caBundle` of each webhook in the patch, decoded, keyed by configuration kind.
fn ca_bundles(dir: &Path) -> BTreeMap<String, String> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&read(dir, "cabundle-patch.yaml")).unwrap();
    docs.iter()
        .map(|doc| {
            let webhooks = doc["webhooks"].as_array().unwrap();
            assert_eq!(webhooks.len(), 1);
            let bundle: ByteString = serde_json::from_value(webhooks[0]["clientConfig"]["caBundle"].clone()).unwrap();
            let kind = format!("{} {} {}", doc["kind"], doc["metadata"]["name"], webhooks[0]["name"]).replace('"', "");
            (kind, String::from_utf8(bundle.0).unwrap())
        })
        .collect()
}

/// The patch sets the CA on the validating webhook only: the mutating one is opt-in
/// (deploy/components/mutating-webhook copies the validating configuration's clientConfig), and a
/// patch for a configuration the overlay does not have would fail its render.
#[test]
fn ca_bundle_patch_sets_the_ca_on_the_validating_webhook() {
    let (_tmp, dir) = fresh();
    let ca = read(&dir, "ca.crt");
    let want: BTreeMap<String, String> =
        ["ValidatingWebhookConfiguration trainguard-validating validate.trainjob.trainguard.io"]
            .iter()
            .map(|k| (k.to_string(), ca.clone()))
            .collect();
    assert_eq!(ca_bundles(&dir), want);

    let kustomization: serde_json::Value = serde_saphyr::from_str(&read(&dir, "kustomization.yaml")).unwrap();
    assert_eq!(kustomization["kind"], "Component");
    assert_eq!(kustomization["resources"], serde_json::json!(["secret.yaml"]));
    assert_eq!(kustomization["patches"], serde_json::json!([{"path": "cabundle-patch.yaml"}]));
}

#[test]
fn rotation_refuses_to_overwrite_then_keeps_trusting_the_old_ca() {
    let (_tmp, dir) = fresh();
    let old_ca = read(&dir, "ca.crt");
    let old_key = read(&dir, "tls.key");

    let again = generate(&dir, &[]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already holds") && stderr.contains("--force"), "{stderr}");
    assert_eq!(read(&dir, "tls.key"), old_key, "nothing replaced without --force");

    let old_ca_file = dir.join("ca.crt");
    let rotated = generate(&dir, &["--force", "--also-trust", old_ca_file.to_str().unwrap()]);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let new_ca = read(&dir, "ca.crt");
    assert_ne!(new_ca, old_ca);
    for (webhook, bundle) in ca_bundles(&dir) {
        assert_eq!(bundle, format!("{new_ca}{old_ca}"), "{webhook} trusts the new and the old CA");
    }
}

#[test]
fn bad_input_gets_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    let out = out.to_str().unwrap();
    let leaf = tmp.path().join("leaf.pem");
    let (_tmp2, other) = fresh();
    std::fs::copy(other.join("tls.crt"), &leaf).unwrap();
    let leaf = leaf.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--out", out, "--service", "Web_Hook"], "--service \"Web_Hook\" is not a valid name"),
        (&["--out", out, "--namespace=-ops"], "--namespace \"-ops\" is not a valid name"),
        (&["--out", out, "--days", "0"], "0 is not in 1..=3650"),
        (&["--out", out, "--also-trust", "/nonexistent/ca.pem"], "reading --also-trust /nonexistent/ca.pem"),
        (&["--out", out, "--also-trust", leaf], "is not a CA"),
        (&[], "--out <DIR>"),
    ];
    for (args, want) in cases {
        let got = certs(args);
        let stderr = String::from_utf8_lossy(&got.stderr);
        assert_eq!(got.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!Path::new(out).join("tls.key").exists(), "{args:?} wrote nothing");
    }
}

/// The real server, started on the files `trainguard certs` wrote, answers a review over TLS to a
/// client that trusts only the generated CA and asks for the Service name.
#[tokio::test]
async fn server_starts_with_the_generated_files_and_answers_the_service_name() {
    let (_tmp, dir) = fresh();
    trainguard::server::tls::install_default_provider();
    let mut registry = Registry::default();
    let metrics = WebhookMetrics::register(&mut registry);
    let settings = ServerSettings {
        bind: "127.0.0.1:0".parse().unwrap(),
        admin_bind: "127.0.0.1:0".parse().unwrap(),
        tls_cert: dir.join("tls.crt"),
        tls_key: dir.join("tls.key"),
        http2: false,
        rules: RulesConfig::default(),
        max_body_bytes: 1 << 20,
        tls_handshake_timeout: Duration::from_secs(5),
        header_read_timeout: Duration::from_secs(5),
        cert_reload_interval: Duration::from_secs(10),
        drain_delay: Duration::ZERO,
        shutdown_grace: Duration::from_secs(5),
        max_inflight_body_bytes: 64 << 20,
        max_connections: 512,
        max_admin_connections: 64,
        idle_timeout: Duration::from_secs(120),
        http2_max_concurrent_streams: 128,
        max_connections_per_ip: 32,
        client_ca: None,
        body_read_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(10),
        evict_idle_after: Duration::from_secs(10),
    };
    let running = trainguard::server::start(settings, Arc::new(Offline), None, metrics, Arc::new(registry))
        .await
        .expect("the server starts with the generated certificate and key");

    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "c0ffee00-0000-4000-8000-000000000001",
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "operation": "CREATE",
            "namespace": "ml-team",
            "name": "llama",
            "object": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                       "metadata": {"name": "llama", "namespace": "ml-team"},
                       "spec": {"runtimeRef": {"name": "torch-distributed"}}},
        },
    })
    .to_string();
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: {SERVICE}.{NAMESPACE}.svc:443\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{review}",
        Endpoint::Validate.path(),
        review.len()
    );
    let client = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(&read(&dir, "ca.crt")))
        .with_no_client_auth();
    let exchange = async {
        let tcp = TcpStream::connect(running.webhook_addr).await.unwrap();
        let name = ServerName::try_from(format!("{SERVICE}.{NAMESPACE}.svc")).unwrap();
        let mut tls = TlsConnector::from(Arc::new(client)).connect(name, tcp).await.expect("handshake");
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut reply = Vec::new();
        tls.read_to_end(&mut reply).await.unwrap();
        String::from_utf8(reply).unwrap()
    };
    let reply = tokio::time::timeout(Duration::from_secs(10), exchange).await.expect("no answer within 10s");
    running.shutdown().await;

    let (head, body) = reply.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let answer: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
    assert_eq!(answer["response"]["uid"], "c0ffee00-0000-4000-8000-000000000001");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}
