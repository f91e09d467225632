//! trainguard: an admission webhook and companion controller for Kubeflow training workloads.

pub mod admission;
pub mod cluster;
pub mod model;
