//! Cluster state as the admission gate sees it. The rules read a [`ClusterView`]; serve mode
//! backs it with watch-fed caches, `validate`/`review --state` and tests with static objects.

pub mod view;

pub use view::{ChildJobState, ClusterView, GateFacts, JobSetFacts, JobSetState, Offline, StaticView};
