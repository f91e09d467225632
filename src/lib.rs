//! trainguard: an admission webhook and companion controller for Kubeflow training workloads.

#![forbid(unsafe_code)]

pub mod admin;
pub mod admission;
pub mod build_info;
pub mod certgen;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod log_writer;
pub mod manifests;
pub mod metrics;
pub mod model;
pub mod rbac;
pub mod server;
pub mod telemetry;
pub mod trainer;
