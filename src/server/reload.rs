//! Certificate hot reload by polling, like controller-runtime's certwatcher: Kubernetes Secret
//! volumes swap a `..data` symlink, which file-event watchers miss. A new pair is swapped in only
//! when both files parse, the key matches the certificate and the certificate is valid now (not
//! expired, not yet to come); otherwise the old pair stays, the refusal is logged with its reason
//! and counted in `trainguard_certificate_reload_refusals_total{reason}`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use super::tls::{LoadedPair, TlsError, load_pair, unix_now};
use crate::server::metrics::{ReasonLabels, ResultLabels, WebhookMetrics};

pub(crate) struct CertReloader {
    pub(crate) cert_path: PathBuf,
    pub(crate) key_path: PathBuf,
    pub(crate) live: Arc<ArcSwap<CertifiedKey>>,
    pub(crate) metrics: WebhookMetrics,
    /// The bytes of the pair in use, to skip parsing when nothing changed.
    last: (Vec<u8>, Vec<u8>),
    /// The last rejected bytes: a bad pair is reported once, not on every poll.
    last_rejected: Option<(Vec<u8>, Vec<u8>)>,
}

/// What one poll did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReloadOutcome {
    Unchanged,
    Reloaded,
    Rejected(String),
}

impl CertReloader {
    /// Loads the initial pair; fails when it is unusable (the server must not start without one).
    pub(crate) fn start(
        cert_path: PathBuf,
        key_path: PathBuf,
        metrics: WebhookMetrics,
    ) -> Result<(Self, LoadedPair), super::tls::TlsError> {
        let (pair, cert_pem, key_pem) = load_pair(&cert_path, &key_path)?;
        // At start there is no older pair to keep: serve it, but say loudly that clients will refuse it.
        if let Err(e) = pair.check_validity(unix_now(), &cert_path) {
            tracing::error!(error = %e, "the serving certificate is outside its validity period");
        }
        metrics.cert_expiry.set(pair.not_after as f64);
        let live = Arc::new(ArcSwap::new(pair.certified.clone()));
        Ok((CertReloader { cert_path, key_path, live, metrics, last: (cert_pem, key_pem), last_rejected: None }, pair))
    }

    /// Re-reads the files once.
    pub(crate) fn poll(&mut self) -> ReloadOutcome {
        let cert = std::fs::read(&self.cert_path);
        let key = std::fs::read(&self.key_path);
        let (cert, key) = match (cert, key) {
            (Ok(cert), Ok(key)) => (cert, key),
            (Err(source), _) => {
                return self.rejected(&TlsError::Read { path: self.cert_path.clone(), source });
            }
            (_, Err(source)) => return self.rejected(&TlsError::Read { path: self.key_path.clone(), source }),
        };
        if cert == self.last.0 && key == self.last.1 {
            return ReloadOutcome::Unchanged;
        }
        if self.last_rejected.as_ref().is_some_and(|(c, k)| *c == cert && *k == key) {
            return ReloadOutcome::Unchanged;
        }
        let parsed = super::tls::parse_pair(&cert, &key, &self.cert_path, &self.key_path)
            .and_then(|pair| pair.check_validity(unix_now(), &self.cert_path).map(|()| pair));
        match parsed {
            Ok(pair) => {
                self.live.store(pair.certified);
                self.metrics.cert_expiry.set(pair.not_after as f64);
                self.metrics.cert_reloads.get_or_create(&ResultLabels { result: "success" }).inc();
                self.last = (cert, key);
                tracing::info!(cert = %self.cert_path.display(), not_after = pair.not_after, "serving certificate reloaded");
                ReloadOutcome::Reloaded
            }
            Err(e) => {
                // Not remembered when only the clock was wrong for it: a not-yet-valid pair is
                // taken once its time comes.
                if !matches!(e, TlsError::NotYetValid { .. }) {
                    self.last_rejected = Some((cert, key));
                }
                self.rejected(&e)
            }
        }
    }

    fn rejected(&self, error: &TlsError) -> ReloadOutcome {
        self.metrics.cert_reloads.get_or_create(&ResultLabels { result: "error" }).inc();
        self.metrics.cert_reload_refusals.get_or_create(&ReasonLabels { reason: error.reason() }).inc();
        tracing::warn!(error = %error, reason = error.reason(), "new serving certificate rejected; keeping the current one");
        ReloadOutcome::Rejected(error.to_string())
    }

    /// Polls every `interval` until `shutdown`.
    pub(crate) async fn run(mut self, interval: Duration, shutdown: CancellationToken) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed pair valid from `from` to `until` (offsets from now).
    fn pair(from: time::Duration, until: time::Duration) -> (String, String) {
        let now = time::OffsetDateTime::now_utc();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = now + from;
        params.not_after = now + until;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn write(dir: &std::path::Path, (cert, key): &(String, String)) {
        std::fs::write(dir.join("tls.crt"), cert).unwrap();
        std::fs::write(dir.join("tls.key"), key).unwrap();
    }

    #[test]
    fn a_reload_refuses_pairs_outside_their_validity_or_with_the_wrong_key() {
        super::super::tls::install_default_provider();
        let dir = tempfile::tempdir().unwrap();
        let hour = time::Duration::hours(1);
        let good = pair(-hour, hour);
        write(dir.path(), &good);
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = WebhookMetrics::register(&mut registry);
        let (mut reloader, _) =
            CertReloader::start(dir.path().join("tls.crt"), dir.path().join("tls.key"), metrics.clone()).unwrap();
        let served = reloader.live.load_full();

        let expired = pair(-2 * hour, -hour);
        let future = pair(hour, 2 * hour);
        let other = pair(-hour, hour);
        let mismatched = (other.0.clone(), good.1.clone());
        let cases = [(&expired, "expired"), (&future, "not valid before"), (&mismatched, "does not belong")];
        for (bad, why) in cases {
            write(dir.path(), bad);
            match reloader.poll() {
                ReloadOutcome::Rejected(message) => assert!(message.contains(why), "{why}: {message}"),
                other => panic!("{why}: {other:?}"),
            }
            assert!(Arc::ptr_eq(&reloader.live.load_full(), &served), "{why}: the old pair stays in use");
        }
        for reason in ["expired", "not_yet_valid", "key_mismatch"] {
            let n = metrics.cert_reload_refusals.get_or_create(&ReasonLabels { reason }).get();
            assert_eq!(n, 1, "{reason}");
        }
        write(dir.path(), &other);
        assert_eq!(reloader.poll(), ReloadOutcome::Reloaded, "a valid pair is still taken");
        assert!(!Arc::ptr_eq(&reloader.live.load_full(), &served));
    }
}
