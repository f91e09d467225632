//! The admission core: every fixture and table through the rules, the views against kube's full types, Trainer's equality, bad input, the shipped matchConditions.
//! One test binary; each file is a module, run by `cargo nextest` one test per process.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a panic is its failure report")]

// The fixture generator's table (`cargo run --example gen_fixtures`), for fixtures_fresh.
#[path = "../../examples/gen_fixtures/builders.rs"]
#[allow(dead_code)]
mod builders;
#[path = "../../examples/gen_fixtures/cases.rs"]
#[allow(dead_code)]
mod cases;
#[path = "../../benches/payloads.rs"]
mod payloads;

#[path = "../support/mod.rs"]
mod support;

mod admission_cel;
mod differential;
mod error_paths;
mod fixtures_fresh;
mod fuzz_review;
mod mutating;
mod rules_table;
