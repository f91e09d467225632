//! The admin port (plain HTTP): `/healthz` (process alive), `/readyz` (docs/webhook.md §4) and `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};
use prometheus_client::registry::Registry;

use crate::cluster::CacheStatus;

/// `/readyz`: certificates loaded, listener up, caches synced once; false from shutdown on.
/// A watch that breaks later does not flip it: with `failurePolicy: Fail`, an unready webhook
/// would block every TrainJob write in the cluster.
///
/// Without the webhook (`serve --webhook=false`, the controller alone) there is no certificate,
/// listener or gate cache to wait for: ready from start to shutdown, whether this replica leads
/// or stands by. No Service sends it traffic; readiness only paces a rollout, and a standby that
/// counted as unready would stall every rolling update.
#[derive(Default)]
pub struct Readiness {
    certs_loaded: AtomicBool,
    listener_up: AtomicBool,
    shutting_down: AtomicBool,
    caches: Option<Arc<dyn CacheStatus>>,
    no_webhook: bool,
    /// The served certificate's validity: an expired one (at start there is no other to serve)
    /// makes the replica unready.
    cert_validity: std::sync::OnceLock<Arc<super::reload::CertValidity>>,
    /// What `/healthz` asks besides "the process answers": the controller's progress.
    liveness: std::sync::OnceLock<Liveness>,
}

/// Why the process is not live, if it is not.
pub(crate) type Liveness = Arc<dyn Fn() -> Option<String> + Send + Sync>;

impl Readiness {
    pub fn new(caches: Option<Arc<dyn CacheStatus>>) -> Self {
        Readiness { caches, ..Default::default() }
    }

    /// The readiness of a process that runs no webhook (`serve --webhook=false`).
    pub(crate) fn without_webhook() -> Self {
        Readiness { no_webhook: true, ..Default::default() }
    }

    pub(crate) fn set_certs_loaded(&self, validity: Arc<super::reload::CertValidity>) {
        let _ = self.cert_validity.set(validity);
        self.certs_loaded.store(true, Ordering::SeqCst);
    }

    pub(crate) fn set_listener_up(&self) {
        self.listener_up.store(true, Ordering::SeqCst);
    }

    /// `/healthz` fails while `check` says why (set once).
    pub(crate) fn set_liveness(&self, check: Liveness) {
        let _ = self.liveness.set(check);
    }

    /// Why the process is not live; `None` when it is.
    pub(crate) fn liveness_problem(&self) -> Option<String> {
        self.liveness.get().and_then(|check| check())
    }

    pub(crate) fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// Shutdown has begun (the drain delay, then the close).
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Why the webhook is not ready; empty when it is.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.shutting_down.load(Ordering::SeqCst) {
            problems.push("shutting down".to_string());
        }
        if self.no_webhook {
            return problems;
        }
        if !self.certs_loaded.load(Ordering::SeqCst) {
            problems.push("serving certificate not loaded".to_string());
        }
        if let Some(problem) = self.cert_validity.get().and_then(|v| v.problem(super::tls::unix_now())) {
            problems.push(problem);
        }
        if !self.listener_up.load(Ordering::SeqCst) {
            problems.push("webhook listener not up".to_string());
        }
        if let Some(caches) = &self.caches {
            for name in caches.unsynced() {
                problems.push(format!("cache {name} not synced yet"));
            }
        }
        problems
    }
}

#[derive(Clone)]
struct AdminState {
    readiness: Arc<Readiness>,
    registry: Arc<Registry>,
}

pub fn router(readiness: Arc<Readiness>, registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(AdminState { readiness, registry })
}

/// What a connection in an admin probe slot is served: the probes, and for anything else a 503
/// saying that the admin port is full.
pub(crate) fn probe_router(readiness: Arc<Readiness>) -> Router {
    let registry = Arc::new(Registry::default());
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(|| async {
            (StatusCode::SERVICE_UNAVAILABLE, "admin connections all in use (--max-admin-connections); probes only\n")
        })
        .with_state(AdminState { readiness, registry })
}

async fn healthz(State(state): State<AdminState>) -> Response {
    match state.readiness.liveness_problem() {
        None => (StatusCode::OK, "ok\n").into_response(),
        Some(problem) => (StatusCode::INTERNAL_SERVER_ERROR, format!("not live: {problem}\n")).into_response(),
    }
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let problems = state.readiness.problems();
    if problems.is_empty() {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {}\n", problems.join("; "))).into_response()
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding metrics: {e}\n")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn healthz_fails_only_while_the_liveness_check_says_why() {
        let stuck = Arc::new(AtomicBool::new(false));
        let readiness = Arc::new(Readiness::without_webhook());
        let flag = stuck.clone();
        readiness.set_liveness(Arc::new(move || flag.load(Ordering::SeqCst).then(|| "wedged".to_string())));
        let state = AdminState { readiness, registry: Arc::new(Registry::default()) };
        for (is_stuck, want) in
            [(false, StatusCode::OK), (true, StatusCode::INTERNAL_SERVER_ERROR), (false, StatusCode::OK)]
        {
            stuck.store(is_stuck, Ordering::SeqCst);
            assert_eq!(healthz(State(state.clone())).await.status(), want, "stuck: {is_stuck}");
        }
    }
}
