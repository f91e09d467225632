//! The companion controller (spec `controller.md`): TTL backstop, suspend report and remedy, and
//! escalation of pod deletions stuck on failed nodes. A pure planner over a compact snapshot; thin
//! shells around it for watches, execution, events, metrics and leader election.

pub mod config;
pub mod events;
pub mod execute;
pub mod facts;
pub mod metrics;
pub mod objects;
pub mod plan;
pub mod snapshot;
pub mod state;
