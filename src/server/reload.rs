//! Certificate hot reload by polling, like controller-runtime's certwatcher: Kubernetes Secret
//! volumes swap a `..data` symlink, which file-event watchers miss. A new pair is swapped in only
//! when both files parse and the key matches the certificate; otherwise the old pair stays.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use super::tls::{LoadedPair, load_pair};
use crate::metrics::{ResultLabels, WebhookMetrics};

pub struct CertReloader {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    pub live: Arc<ArcSwap<CertifiedKey>>,
    pub metrics: WebhookMetrics,
    /// The bytes of the pair in use, to skip parsing when nothing changed.
    last: (Vec<u8>, Vec<u8>),
    /// The last rejected bytes: a bad pair is reported once, not on every poll.
    last_rejected: Option<(Vec<u8>, Vec<u8>)>,
}

/// What one poll did.
#[derive(Debug, PartialEq, Eq)]
pub enum ReloadOutcome {
    Unchanged,
    Reloaded,
    Rejected(String),
}

impl CertReloader {
    /// Loads the initial pair; fails when it is unusable (the server must not start without one).
    pub fn start(
        cert_path: PathBuf,
        key_path: PathBuf,
        metrics: WebhookMetrics,
    ) -> Result<(Self, LoadedPair), super::tls::TlsError> {
        let (pair, cert_pem, key_pem) = load_pair(&cert_path, &key_path)?;
        metrics.cert_expiry.set(pair.not_after as f64);
        let live = Arc::new(ArcSwap::new(pair.certified.clone()));
        Ok((CertReloader { cert_path, key_path, live, metrics, last: (cert_pem, key_pem), last_rejected: None }, pair))
    }

    /// Re-reads the files once.
    pub fn poll(&mut self) -> ReloadOutcome {
        let cert = std::fs::read(&self.cert_path);
        let key = std::fs::read(&self.key_path);
        let (Ok(cert), Ok(key)) = (cert, key) else {
            return self.rejected("certificate or key file unreadable".to_string());
        };
        if cert == self.last.0 && key == self.last.1 {
            return ReloadOutcome::Unchanged;
        }
        if self.last_rejected.as_ref().is_some_and(|(c, k)| *c == cert && *k == key) {
            return ReloadOutcome::Unchanged;
        }
        match super::tls::parse_pair(&cert, &key, &self.cert_path, &self.key_path) {
            Ok(pair) => {
                self.live.store(pair.certified);
                self.metrics.cert_expiry.set(pair.not_after as f64);
                self.metrics.cert_reloads.get_or_create(&ResultLabels { result: "success" }).inc();
                self.last = (cert, key);
                tracing::info!(cert = %self.cert_path.display(), not_after = pair.not_after, "serving certificate reloaded");
                ReloadOutcome::Reloaded
            }
            Err(e) => {
                self.last_rejected = Some((cert, key));
                self.rejected(e.to_string())
            }
        }
    }

    fn rejected(&self, why: String) -> ReloadOutcome {
        self.metrics.cert_reloads.get_or_create(&ResultLabels { result: "error" }).inc();
        tracing::warn!(error = %why, "new serving certificate rejected; keeping the current one");
        ReloadOutcome::Rejected(why)
    }

    /// Polls every `interval` until `shutdown`.
    pub async fn run(mut self, interval: Duration, shutdown: CancellationToken) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => {
                    // File reads are small; a blocking read on the runtime is cheaper than a hop.
                    self.poll();
                }
            }
        }
    }
}
