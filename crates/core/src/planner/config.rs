//! What the planner is told besides the snapshot and `now`: the mode and the knobs, as plain data.
//! The binary builds a [`PlanConfig`] from its flags (each also an env var); the names here are the
//! flags' values.

use k8s_openapi::jiff::SignedDuration;

/// `report` (the default) only logs and emits `Would…` events; `act` performs the actions and is
/// always asked for explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    Act,
    #[default]
    Report,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Act => "act",
            Mode::Report => "report",
        }
    }
}

/// Which node states allow escalating a stuck pod deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeFailureMode {
    /// Missing, out-of-service, or kubelet gone (`Ready` Unknown/absent with the `unreachable`
    /// NoExecute taint) past `node_not_ready_for`: the nodes Kueue's own force delete trusts.
    #[default]
    Unreachable,
    /// Also a node whose kubelet still reports `Ready=False` with the `not-ready` NoExecute taint.
    NotReady,
    /// Only what Kubernetes' own PodGC trusts: missing or `node.kubernetes.io/out-of-service`.
    OutOfService,
    /// Never escalate; stuck pods are still reported.
    Off,
}

/// The propagation policy of the TTL delete, in Kubernetes' spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete the job now, its pods in the background.
    #[default]
    Background,
    /// Delete the pods first, then the job.
    Foreground,
    /// Delete the job, leave its pods.
    Orphan,
}

impl Propagation {
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }
}

/// What the planner needs to know.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanConfig {
    pub mode: Mode,
    /// Delete finished jobs whose TTL (plus `ttl_grace`) has passed.
    pub ttl: bool,
    pub ttl_grace: SignedDuration,
    pub ttl_propagation: Propagation,
    /// How long a suspended job may keep pods or lack its Suspended condition before it is reported.
    pub suspend_stuck_after: SignedDuration,
    /// Move a stuck suspended job's TTL into an annotation, and back on resume.
    pub stash_ttl_on_stuck_suspend: bool,
    /// How long a Kueue Workload may be Admitted while its job stays suspended before it is reported.
    pub admitted_suspended_after: SignedDuration,
    pub node_failure: NodeFailureMode,
    /// How long a node must be NotReady (with the NoExecute taint) before it counts as unhealthy.
    pub node_not_ready_for: SignedDuration,
    /// How long past its deletionTimestamp a pod must be stuck before its deletion is escalated.
    pub force_delete_after: SignedDuration,
    /// The zone brake: pause force deletes in a zone when more than 2 of its nodes, and at least
    /// this fraction, are unhealthy.
    pub pause_unhealthy_fraction: f64,
    /// The force-delete token bucket: this many per minute, bursting to as many.
    pub max_force_deletes_per_minute: u32,
}

impl Default for PlanConfig {
    /// What the flags give: report mode (no writes).
    fn default() -> Self {
        PlanConfig {
            mode: Mode::Report,
            ttl: true,
            ttl_grace: SignedDuration::from_secs(30),
            ttl_propagation: Propagation::Background,
            suspend_stuck_after: SignedDuration::from_mins(2),
            stash_ttl_on_stuck_suspend: false,
            admitted_suspended_after: SignedDuration::from_mins(5),
            node_failure: NodeFailureMode::Unreachable,
            node_not_ready_for: SignedDuration::from_mins(5),
            force_delete_after: SignedDuration::from_mins(2),
            pause_unhealthy_fraction: 0.55,
            max_force_deletes_per_minute: 20,
        }
    }
}

impl PlanConfig {
    /// The defaults in act mode, which tests of the writes start from.
    pub fn acting() -> Self {
        PlanConfig { mode: Mode::Act, ..PlanConfig::default() }
    }

    /// The durations that must not be negative, by flag name: the first one that is.
    pub fn negative_duration(&self) -> Option<&'static str> {
        [
            ("force-delete-after", self.force_delete_after),
            ("node-not-ready-for", self.node_not_ready_for),
            ("suspend-stuck-after", self.suspend_stuck_after),
            ("ttl-grace", self.ttl_grace),
            ("admitted-suspended-after", self.admitted_suspended_after),
        ]
        .into_iter()
        .find(|(_, d)| d.is_negative())
        .map(|(name, _)| name)
    }
}
