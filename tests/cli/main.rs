//! The command line and what ships: `validate`, `review`, `plan`, the schema check, the GitHub Action, deploy manifests, the image recipe and monitoring.
//! One test binary; each file is a module, run by `cargo nextest` one test per process.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code: a panic is its failure report")]

mod action;
mod deploy;
mod docs;
mod image;
mod makefile;
mod monitoring;
mod plan_cli;
mod rbac;
mod review;
mod schema;
mod serve_refusals;
mod validate;
