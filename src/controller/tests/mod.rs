//! The controller's shells under test: the live loop's bookkeeping, and the executor, the live loop
//! and leader election against the in-process fake API server, on the objects of
//! `trainguard_test_support::objects` (the planner's own tables are in `crates/core/tests/planner/`).

mod execute;
mod live;
mod namespaces;
mod state;
