//! What trainguard's integration tests, examples, benches and fuzz targets share. It uses
//! trainguard as another crate would; the fake Kubernetes API and `eventually` are in the test
//! kit (`trainguard-fake-api`), which the unit tests in `src/` can use too.

/// The fixture generator's table (`cargo run --example gen_fixtures`) and its object builders.
pub mod builders;
pub mod cases;
/// The admission fixtures (`fixtures/admission/**`), loaded and checked.
pub mod fixtures;
/// The properties every answer to any body must have (shared with `make fuzz`).
pub mod fuzz;
/// The benchmark payloads (`fixtures/bench/`) of the Criterion bench and `review_parts`.
pub mod payloads;
/// The RBAC rules under deploy/, generated from the API-call table (`cargo run --example gen_rbac`).
pub mod rbac;
/// A real trainguard server on loopback with rcgen certificates, and real HTTP/1.1 and HTTP/2 clients.
#[cfg(feature = "tls")]
pub mod tls;

/// The repository's root (where `fixtures/` and `tests/data/` are).
pub fn repo_root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}
