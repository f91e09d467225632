//! What trainguard's tests, examples, benches and fuzz targets share. It needs only the core, so the
//! core's own tests and the unit tests in `src/` use it as well as the integration tests; what needs
//! trainguard itself (a server on loopback, the RBAC rules) is in `trainguard-binary-support`, and
//! the fake Kubernetes API and `eventually` are in the test kit (`trainguard-fake-api`).

/// The fixture generator's table (`cargo run --example gen_fixtures`) and its object builders.
pub mod builders;
pub mod cases;
/// The admission fixtures (`fixtures/admission/**`), loaded and checked.
pub mod fixtures;
/// The properties every answer to any body must have (shared with `make fuzz`).
pub mod fuzz;
/// The controller's objects as `kubectl get -o json` prints them, and the planner run over them.
pub mod objects;
/// The benchmark payloads (`fixtures/bench/`) of the Criterion bench and `review_parts`.
pub mod payloads;

/// The repository's root (where `fixtures/` and `tests/data/` are).
pub fn repo_root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}
