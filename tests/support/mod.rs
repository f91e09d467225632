//! Code the integration tests share. Each test binary includes this tree whole; a binary that uses
//! only part of it leaves the rest unused, hence the `dead_code` allowance.
#![allow(dead_code)]

/// The admission fixtures (`fixtures/admission/**`), loaded and checked.
pub(crate) mod fixtures;
/// The properties every answer to any body must have (shared with `make fuzz`).
pub(crate) mod fuzz;
/// A real trainguard server on loopback with rcgen certificates, and real HTTP/1.1 and HTTP/2 clients.
pub(crate) mod tls;
