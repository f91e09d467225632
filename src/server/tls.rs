//! TLS for the webhook listener: rustls with TLS 1.2 and 1.3, ALPN `http/1.1` (plus `h2` when
//! enabled), and a certificate resolver that reads the live pair from an `ArcSwap`, so a reload
//! changes what new handshakes get without touching open connections.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: no PEM certificate found")]
    NoCertificate { path: PathBuf },
    #[error("{path}: not a PEM certificate chain: {message}")]
    BadCertificate { path: PathBuf, message: String },
    #[error("{path}: no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {message}")]
    BadKey { path: PathBuf, message: String },
    #[error("{key} does not belong to the certificate in {cert}")]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{path}: certificate does not parse as X.509: {message}")]
    BadX509 { path: PathBuf, message: String },
    #[error("{path}: no usable CA certificate for client authentication: {message}")]
    ClientCa { path: PathBuf, message: String },
    #[error("{path}: certificate expired at {not_after} (Unix time), now is {now}")]
    Expired { path: PathBuf, not_after: i64, now: i64 },
    #[error("{path}: certificate not valid before {not_before} (Unix time), now is {now}")]
    NotYetValid { path: PathBuf, not_before: i64, now: i64 },
}

impl TlsError {
    /// The `reason` label of `trainguard_certificate_reload_refusals_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            TlsError::Read { .. } => "unreadable",
            TlsError::KeyMismatch { .. } => "key_mismatch",
            TlsError::Expired { .. } => "expired",
            TlsError::NotYetValid { .. } => "not_yet_valid",
            TlsError::NoCertificate { .. }
            | TlsError::ClientCa { .. }
            | TlsError::BadCertificate { .. }
            | TlsError::BadKey { .. }
            | TlsError::BadX509 { .. } => "unparsable",
        }
    }
}

/// A parsed, matching certificate + key pair, with the leaf's expiry.
#[derive(Debug, Clone)]
pub struct LoadedPair {
    pub certified: Arc<CertifiedKey>,
    /// The leaf's notBefore, seconds since the Unix epoch.
    pub(crate) not_before: i64,
    /// The leaf's notAfter, seconds since the Unix epoch.
    pub(crate) not_after: i64,
}

impl LoadedPair {
    /// Whether the leaf is valid at `now` (seconds since the Unix epoch); the error says why not.
    pub(crate) fn check_validity(&self, now: i64, cert_path: &Path) -> Result<(), TlsError> {
        if now < self.not_before {
            return Err(TlsError::NotYetValid { path: cert_path.into(), not_before: self.not_before, now });
        }
        if now > self.not_after {
            return Err(TlsError::Expired { path: cert_path.into(), not_after: self.not_after, now });
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Parses a PEM chain and key and checks that they belong together.
pub(crate) fn parse_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<LoadedPair, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::BadCertificate { path: cert_path.into(), message: e.to_string() })?;
    let Some(leaf) = certs.first() else {
        return Err(TlsError::NoCertificate { path: cert_path.into() });
    };
    let parsed = x509_parser::parse_x509_certificate(leaf)
        .map_err(|e| TlsError::BadX509 { path: cert_path.into(), message: e.to_string() })?
        .1;
    let (not_before, not_after) = (parsed.validity().not_before.timestamp(), parsed.validity().not_after.timestamp());
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| TlsError::BadKey { path: key_path.into(), message: e.to_string() })?;
    let provider = provider();
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::BadKey { path: key_path.into(), message: e.to_string() })?;
    let certified = CertifiedKey::new(certs, signing_key);
    certified.keys_match().map_err(|_| TlsError::KeyMismatch { cert: cert_path.into(), key: key_path.into() })?;
    Ok(LoadedPair { certified: Arc::new(certified), not_before, not_after })
}

/// Reads and parses the pair from disk (again when the two reads straddle a swap of a Secret
/// volume).
pub fn load_pair(cert_path: &Path, key_path: &Path) -> Result<(LoadedPair, Vec<u8>, Vec<u8>), TlsError> {
    read_pair(cert_path, key_path, |p| std::fs::read(p))
}

/// Reads of the certificate and key when they do not belong together: a Secret volume swaps both
/// at once (its `..data` symlink), but the two reads may fall on either side of a swap.
pub(crate) const READ_ATTEMPTS: usize = 3;

/// Reads the certificate and the key, again (up to [`READ_ATTEMPTS`] times) when they do not
/// belong together. `read` is `std::fs::read`; a seam for the tests.
pub(crate) fn read_pair(
    cert_path: &Path,
    key_path: &Path,
    mut read: impl FnMut(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<(LoadedPair, Vec<u8>, Vec<u8>), TlsError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let cert = read(cert_path).map_err(|source| TlsError::Read { path: cert_path.into(), source })?;
        let key = read(key_path).map_err(|source| TlsError::Read { path: key_path.into(), source })?;
        match parse_pair(&cert, &key, cert_path, key_path) {
            Err(TlsError::KeyMismatch { .. }) if attempt < READ_ATTEMPTS => continue,
            parsed => return parsed.map(|pair| (pair, cert, key)),
        }
    }
}

/// The crypto provider the whole binary uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default().cloned().unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// Installs ring as the process-wide provider (kube's client and the server share it).
pub fn install_default_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Hands every handshake the pair currently in the swap.
#[derive(Debug)]
pub(crate) struct LiveCert(pub Arc<ArcSwap<CertifiedKey>>);

impl ResolvesServerCert for LiveCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// Verifies client certificates against the CAs in `path` (PEM; `--client-ca`): a client must
/// present a certificate they signed.
pub(crate) fn client_verifier(path: &Path) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let pem = std::fs::read(path).map_err(|source| TlsError::Read { path: path.into(), source })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| TlsError::ClientCa { path: path.into(), message: e.to_string() })?;
        roots.add(cert).map_err(|e| TlsError::ClientCa { path: path.into(), message: e.to_string() })?;
    }
    if roots.is_empty() {
        return Err(TlsError::ClientCa { path: path.into(), message: "no PEM certificate found".into() });
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| TlsError::ClientCa { path: path.into(), message: e.to_string() })
}

/// The rustls server configuration: TLS 1.2 + 1.3, ALPN per `http2`, client certificates
/// required when `client_auth` is given.
pub fn server_config(
    live: Arc<ArcSwap<CertifiedKey>>,
    http2: bool,
    client_auth: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Arc<rustls::ServerConfig> {
    #[allow(clippy::expect_used, reason = "ring supports TLS 1.2 and 1.3: the builder cannot fail")]
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.2 and 1.3");
    let builder = match client_auth {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(LiveCert(live)));
    config.alpn_protocols = if http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
    Arc::new(config)
}
