//! trainguard: an admission webhook and companion controller for Kubeflow training workloads.

#![forbid(unsafe_code)]

pub mod build_info;
pub mod certgen;
pub mod cli;
pub mod cluster;
pub mod controller;
pub(crate) mod dns_label;
pub mod logging;
pub mod manifests;
pub mod rbac;
pub mod server;
