//! What trainguard's integration tests and examples share that uses trainguard itself as a crate
//! (the server, the API-call table). What needs only the core (builders, the admission fixtures,
//! the bench payloads, the fuzz properties) is in `trainguard-test-support`.

/// The RBAC rules and bindings under deploy/, generated from the API-call table (`cargo run --example gen_rbac`).
pub mod rbac;
/// A real trainguard server on loopback with rcgen certificates, and real HTTP/1.1 and HTTP/2 clients.
pub mod tls;
