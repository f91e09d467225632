//! Certificate hot reload by polling, like controller-runtime's certwatcher: Kubernetes Secret
//! volumes swap a `..data` symlink, which file-event watchers miss. A new pair is swapped in only
//! when both files parse, the key matches the certificate and the certificate is valid now (not
//! expired, not yet to come); otherwise the old pair stays, the refusal is logged with its reason
//! and counted in `trainguard_certificate_reload_refusals_total{reason}`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use super::tls::{LoadedPair, READ_ATTEMPTS, TlsError, read_pair, unix_now};
use crate::server::metrics::{ReasonLabels, ResultLabels, WebhookMetrics};

/// The validity period of the pair being served (seconds since the Unix epoch), for `/readyz`:
/// an expired certificate at start is served (there is no other), but the replica is not ready.
#[derive(Debug, Default)]
pub(crate) struct CertValidity {
    not_before: AtomicI64,
    not_after: AtomicI64,
}

impl CertValidity {
    fn set(&self, pair: &LoadedPair) {
        self.not_before.store(pair.not_before, Ordering::SeqCst);
        self.not_after.store(pair.not_after, Ordering::SeqCst);
    }

    /// Why the served certificate is not valid at `now`, if it is not.
    pub(crate) fn problem(&self, now: i64) -> Option<String> {
        let (not_before, not_after) = (self.not_before.load(Ordering::SeqCst), self.not_after.load(Ordering::SeqCst));
        if now > not_after {
            Some(format!("serving certificate expired at {not_after} (Unix time)"))
        } else if now < not_before {
            Some(format!("serving certificate not valid before {not_before} (Unix time)"))
        } else {
            None
        }
    }
}

pub(crate) struct CertReloader {
    pub(crate) cert_path: PathBuf,
    pub(crate) key_path: PathBuf,
    pub(crate) live: Arc<ArcSwap<CertifiedKey>>,
    /// The served pair's validity, read by `/readyz`.
    pub(crate) validity: Arc<CertValidity>,
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
        let (pair, cert_pem, key_pem) = read_pair(&cert_path, &key_path, |p| std::fs::read(p))?;
        // At start there is no older pair to keep: serve it, but say loudly that clients will
        // refuse it, and `/readyz` says so too.
        if let Err(e) = pair.check_validity(unix_now(), &cert_path) {
            tracing::error!(error = %e, "the serving certificate is outside its validity period");
        }
        metrics.cert_expiry.set(pair.not_after as f64);
        let live = Arc::new(ArcSwap::new(pair.certified.clone()));
        let validity = Arc::new(CertValidity::default());
        validity.set(&pair);
        let reloader = CertReloader {
            cert_path,
            key_path,
            live,
            validity,
            metrics,
            last: (cert_pem, key_pem),
            last_rejected: None,
        };
        Ok((reloader, pair))
    }

    /// Re-reads the files once (a few times when the two reads straddle a swap).
    pub(crate) fn poll(&mut self) -> ReloadOutcome {
        let mut attempt = 0;
        loop {
            attempt += 1;
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
            return match parsed {
                // Read on either side of a swap of the Secret volume: read both again.
                Err(TlsError::KeyMismatch { .. }) if attempt < READ_ATTEMPTS => continue,
                Ok(pair) => {
                    self.validity.set(&pair);
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
            };
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
    use std::path::Path;

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

    /// The certificate read before a swap of the Secret volume, the key after it: read again.
    #[test]
    fn a_pair_read_across_a_swap_is_read_again() {
        super::super::tls::install_default_provider();
        let hour = time::Duration::hours(1);
        let (old, new) = (pair(-hour, hour), pair(-hour, hour));
        let (cert_path, key_path) = (Path::new("tls.crt"), Path::new("tls.key"));
        // Reads in order: cert (old), key (new: swapped in between), then both new.
        let cases: [(&str, Vec<&String>, Result<(), &str>); 3] = [
            ("consistent", vec![&new.0, &new.1], Ok(())),
            ("straddling one swap", vec![&old.0, &new.1, &new.0, &new.1], Ok(())),
            ("mismatched every time", [&old.0, &new.1].repeat(READ_ATTEMPTS), Err("does not belong")),
        ];
        for (what, reads, want) in cases {
            let mut reads = reads.into_iter();
            let got = read_pair(cert_path, key_path, |_| Ok(reads.next().expect("no more reads").as_bytes().to_vec()));
            match (got, want) {
                (Ok((_, cert, key)), Ok(())) => {
                    assert_eq!((cert, key), (new.0.clone().into_bytes(), new.1.clone().into_bytes()), "{what}")
                }
                (Err(e), Err(why)) => assert!(e.to_string().contains(why), "{what}: {e}"),
                (got, want) => panic!("{what}: {:?} / {want:?}", got.map(|_| ())),
            }
            assert_eq!(reads.next(), None, "{what}: every planned read made");
        }
    }

    #[test]
    fn the_validity_of_the_served_pair_is_what_readyz_reads() {
        let validity = CertValidity::default();
        validity.not_before.store(100, Ordering::SeqCst);
        validity.not_after.store(200, Ordering::SeqCst);
        for (now, problem) in [(50, Some("not valid before 100")), (150, None), (201, Some("expired at 200"))] {
            let got = validity.problem(now);
            assert_eq!(got.is_some(), problem.is_some(), "{now}: {got:?}");
            if let (Some(got), Some(want)) = (got, problem) {
                assert!(got.contains(want), "{now}: {got}");
            }
        }
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
