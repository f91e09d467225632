//! The companion controller: the pure planner, the executor and live loop against a fake API server, `trainguard plan`.
//! One test binary; each file is a module, run by `cargo nextest` one test per process.

#[path = "../support/mod.rs"]
mod support;

mod execute;
mod live;
mod plan;
mod plan_cli;
mod state;
