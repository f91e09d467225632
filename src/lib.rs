//! trainguard: an admission webhook and companion controller for Kubeflow training workloads.

pub mod admission;
pub mod certgen;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod manifests;
pub mod model;
pub mod rbac;
