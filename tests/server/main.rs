//! The HTTPS server and what runs around it: fixtures over real TLS, limits, lifecycle, memory, certificates, the cluster cache.
//! One test binary; each file is a module, run by `cargo nextest` one test per process.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a panic is its failure report")]

use trainguard_test_support as support;

mod certs;
mod cluster_cache;
mod serve_modes;
mod server_fixtures;
mod server_hostile;
mod server_lifecycle;
mod server_limits;
mod server_memory;
mod server_tls;
