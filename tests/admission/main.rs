//! The admission core: every fixture and table through the rules, the views against kube's full types, Trainer's equality, bad input, the shipped matchConditions.
//! One test binary; each file is a module, run by `cargo nextest` one test per process.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a panic is its failure report")]

// The fixture generator's table (`cargo run --example gen_fixtures`), the bench payloads and the
// fixtures' loader, shared with the examples, benches and fuzz targets.
use trainguard_test_support as support;
use trainguard_test_support::{builders, cases, payloads};

mod admission_cel;
mod differential;
mod error_paths;
mod fixtures_fresh;
mod fuzz_review;
mod mutating;
mod rules_table;
