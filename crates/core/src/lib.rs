//! trainguard's decisions, as pure functions over plain data: no I/O, no clock, no runtime.
//!
//! - [`admission`]: an AdmissionReview's bytes in, the answer's bytes out (the validating rules,
//!   the mutating defaults, the Kubernetes `Status` they render into).
//! - [`trainer`]: one typed model of TrainJob per Kubeflow Trainer release, Trainer's own equality
//!   of the overrides, and each release's CRD applied as the API server applies it.
//! - [`schema`]: `validate`'s schema check, each release's CRD findings as the webhook's field errors.
//! - [`planner`]: the companion controller's `(snapshot, now, config) → actions`.
//! - [`model`]: serde views of the Kubernetes objects those read (only the fields they read).
//! - [`view`]: what the admission gate knows about the cluster, as a trait the binary backs with
//!   watch-fed caches.
//!
//! The binary (`trainguard`) is the I/O around this: the HTTPS server, the caches, the executor
//! and the CLI. Nothing here depends on tokio, hyper or clap, and `make lint` checks it stays so.

#![forbid(unsafe_code)]

pub mod admission;
pub mod duration;
pub mod index;
pub mod model;
pub mod planner;
pub mod schema;
pub mod trainer;
pub mod view;
