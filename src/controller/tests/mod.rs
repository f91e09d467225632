//! The controller's tests: the pure planner and state tables, and the executor, the live loop and
//! leader election against the in-process fake API server (`super::testing`).

mod execute;
mod live;
mod namespaces;
mod plan;
mod state;
