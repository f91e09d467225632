//! Test support: a real trainguard server on loopback with rcgen certificates, and real
//! HTTP/1.1 and HTTP/2 clients over rustls that trust only the test CA.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use prometheus_client::registry::Registry;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use trainguard::certgen::{GeneratedChain, generate_chain};
use trainguard::cluster::{ClusterView, Offline};
pub use trainguard::server::ServerSettings;
use trainguard::server::metrics::WebhookMetrics;
use trainguard::server::{self, RunningServer};

pub const VALIDATE: &str = "/validate-trainer-kubeflow-org-v1alpha1-trainjob";
pub const MUTATE: &str = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob";

pub fn chain() -> GeneratedChain {
    let sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    generate_chain("trainguard test CA", &sans, Duration::from_secs(3600)).expect("certificates")
}

/// Writes a pair the way the kubelet lays out a Secret volume: `..data` is a symlink to a
/// timestamped directory, and `tls.crt` / `tls.key` are symlinks through `..data`.
pub fn write_secret_volume(dir: &Path, chain: &GeneratedChain, generation: u32) {
    let versioned = dir.join(format!("..2026_11_22_{generation:04}"));
    std::fs::create_dir_all(&versioned).unwrap();
    std::fs::write(versioned.join("tls.crt"), &chain.cert_pem).unwrap();
    std::fs::write(versioned.join("tls.key"), &chain.key_pem).unwrap();
    let tmp_link = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp_link);
    std::os::unix::fs::symlink(versioned.file_name().unwrap(), &tmp_link).unwrap();
    // rename(2) over the old link is atomic, as in the kubelet's AtomicWriter.
    std::fs::rename(&tmp_link, dir.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        let link = dir.join(file);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{file}"), &link).unwrap();
        }
    }
}

pub struct TestServer {
    pub running: Option<RunningServer>,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub ca_pem: String,
    pub chain: GeneratedChain,
    pub dir: tempfile::TempDir,
}

/// `serve`'s settings with every flag at its default, on loopback ports: what a test server
/// starts from, with the test's overrides (`ServerSettings { max_connections: 2, ..defaults() }`).
pub fn defaults() -> ServerSettings {
    let loopback = "127.0.0.1:0".parse().unwrap();
    trainguard::cli::serve::default_server_settings(loopback, loopback)
}

/// A test server: the product's settings ([`defaults`] with overrides) and the cluster it reads.
#[derive(Clone)]
pub struct Options {
    pub settings: ServerSettings,
    pub cluster: Arc<dyn ClusterView>,
    pub caches: Option<Arc<dyn trainguard::cluster::CacheStatus>>,
}

impl Default for Options {
    fn default() -> Self {
        Options::from(defaults())
    }
}

impl From<ServerSettings> for Options {
    fn from(settings: ServerSettings) -> Self {
        Options { settings, cluster: Arc::new(Offline), caches: None }
    }
}

/// The settings of `opts` with the serving certificate and key in `dir`.
pub fn settings_for(dir: &Path, opts: &Options) -> ServerSettings {
    ServerSettings { tls_cert: dir.join("tls.crt"), tls_key: dir.join("tls.key"), ..opts.settings.clone() }
}

pub async fn start(opts: Options) -> TestServer {
    trainguard::server::tls::install_default_provider();
    let dir = tempfile::tempdir().unwrap();
    let chain = chain();
    write_secret_volume(dir.path(), &chain, 1);
    let mut registry = Registry::default();
    let metrics = WebhookMetrics::register(&mut registry);
    let running = server::start(
        settings_for(dir.path(), &opts),
        opts.cluster.clone(),
        opts.caches.clone(),
        metrics,
        Arc::new(registry),
    )
    .await
    .expect("server starts");
    TestServer {
        addr: running.webhook_addr,
        admin: running.admin_addr,
        running: Some(running),
        ca_pem: chain.ca_cert_pem.clone(),
        chain,
        dir,
    }
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{}", self.addr.port(), path)
    }

    pub async fn shutdown(&mut self) -> server::ShutdownReport {
        self.running.take().expect("running").shutdown().await
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

pub fn root_store(ca_pems: &[&str]) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for pem in ca_pems {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
    }
    roots
}

pub fn client_tls(ca_pems: &[&str], versions: &[&'static rustls::SupportedProtocolVersion]) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(trainguard::server::tls::provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(root_store(ca_pems))
        .with_no_client_auth()
}

pub type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A pooled HTTPS client: HTTP/1.1 keep-alive, or HTTP/2 only.
pub fn client(ca_pem: &str, http2: bool) -> HttpsClient {
    client_with(client_tls(&[ca_pem], rustls::ALL_VERSIONS), http2)
}

pub fn client_with(tls: rustls::ClientConfig, http2: bool) -> HttpsClient {
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_only();
    let connector = if http2 { builder.enable_http2().build() } else { builder.enable_http1().build() };
    Client::builder(TokioExecutor::new()).http2_only(http2).build(connector)
}

pub struct Reply {
    pub status: StatusCode,
    pub version: http::Version,
    pub content_type: String,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

pub async fn send(client: &HttpsClient, method: &str, url: &str, content_type: &str, body: Vec<u8>) -> Reply {
    let req = Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = client.request(req).await.expect("request completes");
    let status = resp.status();
    let version = resp.version();
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Reply { status, version, content_type, body }
}

pub async fn post_json(client: &HttpsClient, url: &str, body: &[u8]) -> Reply {
    send(client, "POST", url, "application/json", body.to_vec()).await
}

/// A minimal AdmissionReview for a TrainJob UPDATE.
pub fn update_review(uid: &str, old: serde_json::Value, new: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
            "name": "llama",
            "namespace": "ml-team",
            "operation": "UPDATE",
            "userInfo": {"username": "alice"},
            "object": new,
            "oldObject": old,
        }
    }))
    .unwrap()
}

pub fn trainjob(suspend: bool, gpu: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "ml-team"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "suspend": suspend,
            "podSpecOverrides": [{"targetJobs": [{"name": "node"}], "nodeSelector": {"gpu": gpu}}]
        }
    })
}

/// Fetches a plain-HTTP admin path: (status, body).
pub async fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let status = raw.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// A TCP connection to `addr` from the loopback address `source` (any of 127.0.0.0/8 works on
/// Linux): tells a well-behaved client apart from a noisy one on the same machine.
pub async fn connect_from(source: &str, addr: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// A TLS connection from `source` trusting `ca_pem`, with these ALPN protocols.
pub async fn tls_from(
    source: &str,
    addr: SocketAddr,
    ca_pem: &str,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut tls = client_tls(&[ca_pem], rustls::ALL_VERSIONS);
    tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = connect_from(source, addr).await;
    tokio_rustls::TlsConnector::from(Arc::new(tls)).connect("localhost".try_into().unwrap(), tcp).await.unwrap()
}

/// Posts `body` to `path` over an open HTTP/1.1 connection and reads the answer (headers and
/// `Content-Length` bytes): the status code and the whole text; status 0 if the connection
/// closed or `limit` passed first.
pub async fn http1_post<S>(conn: &mut S, path: &str, body: &[u8], limit: Duration) -> (u16, String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    if conn.write_all(&request).await.is_err() || conn.flush().await.is_err() {
        return (0, String::new());
    }
    let text = read_response(conn, limit).await;
    let status = if response_complete(text.as_bytes()) {
        text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    } else {
        0
    };
    (status, text)
}

/// Reads one HTTP/1.1 response (headers and `Content-Length` bytes of body), or until the
/// connection closes or `limit` passes: what arrived.
pub async fn read_response<S>(conn: &mut S, limit: Duration) -> String
where
    S: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
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

/// Whether `buf` holds a whole response: headers, and as many body bytes as `Content-Length` says.
pub fn response_complete(buf: &[u8]) -> bool {
    let text = String::from_utf8_lossy(buf);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>()))
        .and_then(Result::ok);
    length.is_some_and(|n| body.len() >= n)
}

/// Fetches a plain-HTTP admin path from the loopback address `source`: (status, body), status 0
/// when the connection closed without an answer.
pub async fn admin_get_from(source: &str, addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = connect_from(source, addr).await;
    let _ =
        stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n").as_bytes()).await;
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw).await;
    let status = raw.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// Whether the peer closes `stream` within `limit` (EOF or a reset), reading and discarding.
pub async fn closes_within<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, limit: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut sink = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut sink)).await.is_ok()
}
