//! The controller's metrics (docs/controller.md (Events, Metrics and Knobs)), under controller-runtime's names where one exists so
//! existing dashboards work. No object names as labels. Registered into the registry the server
//! exposes on `/metrics`; cloning shares the underlying series.

use std::collections::HashMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use trainguard_core::planner::Observation;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub controller: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindResultLabels {
    pub kind: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeStateLabels {
    pub node_state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    // 100µs … ~3.3s: planning is microseconds, execution is API round trips.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

#[derive(Clone)]
pub struct Metrics {
    pub reconcile_total: Family<ReconcileLabels, Counter>,
    pub reconcile_errors_total: Family<ControllerLabels, Counter>,
    pub reconcile_time_seconds: HistogramFamily<ControllerLabels>,
    pub leader_election_master_status: Family<NameLabels, Gauge>,
    pub ttl_deletions_total: Family<KindResultLabels, Counter>,
    pub(crate) ttl_deletion_delay_seconds: Histogram,
    pub ttl_scheduled_jobs: Family<KindLabels, Gauge>,
    pub suspend_not_reconciled_jobs: Family<KindLabels, Gauge>,
    pub admitted_but_suspended_jobs: Family<KindLabels, Gauge>,
    pub jobset_recreated_after_failure_trainjobs: Family<KindLabels, Gauge>,
    pub pods_stuck_terminating: Family<NodeStateLabels, Gauge>,
    pub pod_force_deletions_total: Family<ResultLabels, Counter>,
    pub force_delete_suppressed_total: Family<ReasonLabels, Counter>,
    /// The executor's progress, for `/healthz` (not exported as a metric).
    pub progress: std::sync::Arc<super::health::Progress>,
}

impl Metrics {
    /// Creates the series and registers them. Call once, before the server starts serving.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Metrics {
            reconcile_total: Family::default(),
            reconcile_errors_total: Family::default(),
            reconcile_time_seconds: Family::new_with_constructor(reconcile_histogram as fn() -> Histogram),
            leader_election_master_status: Family::default(),
            ttl_deletions_total: Family::default(),
            // 1s … ~9h: how late past expiry a TTL deletion happened.
            ttl_deletion_delay_seconds: Histogram::new(exponential_buckets(1.0, 2.0, 16)),
            ttl_scheduled_jobs: Family::default(),
            suspend_not_reconciled_jobs: Family::default(),
            admitted_but_suspended_jobs: Family::default(),
            jobset_recreated_after_failure_trainjobs: Family::default(),
            pods_stuck_terminating: Family::default(),
            pod_force_deletions_total: Family::default(),
            force_delete_suppressed_total: Family::default(),
            progress: std::sync::Arc::default(),
        };
        // prometheus-client appends `_total` to counters.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time_seconds.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            m.leader_election_master_status.clone(),
        );
        registry.register(
            "trainguard_ttl_deletions",
            "TTL deletions of finished training jobs by result",
            m.ttl_deletions_total.clone(),
        );
        registry.register(
            "trainguard_ttl_deletion_delay_seconds",
            "Seconds between a job's TTL expiry (finish + ttlSecondsAfterFinished) and its deletion",
            m.ttl_deletion_delay_seconds.clone(),
        );
        registry.register(
            "trainguard_ttl_scheduled_jobs",
            "Finished jobs waiting for their TTL to expire",
            m.ttl_scheduled_jobs.clone(),
        );
        registry.register(
            "trainguard_suspend_not_reconciled_jobs",
            "Suspended jobs whose suspension the operator has not finished past --suspend-stuck-after",
            m.suspend_not_reconciled_jobs.clone(),
        );
        registry.register(
            "trainguard_admitted_but_suspended_jobs",
            "Jobs still suspended past --admitted-suspended-after while their Kueue Workload is Admitted",
            m.admitted_but_suspended_jobs.clone(),
        );
        registry.register(
            "trainguard_jobset_recreated_after_failure_trainjobs",
            "Failed TrainJobs whose JobSet was created after the failure (Trainer's JobSet-TTL loop)",
            m.jobset_recreated_after_failure_trainjobs.clone(),
        );
        registry.register(
            "trainguard_pods_stuck_terminating",
            "Training pods terminating past --force-delete-after on a node that is not Ready",
            m.pods_stuck_terminating.clone(),
        );
        registry.register(
            "trainguard_pod_force_deletions",
            "Force deletions of training pods stuck on failed nodes, by result",
            m.pod_force_deletions_total.clone(),
        );
        registry.register(
            "trainguard_force_delete_suppressed",
            "Force deletions held back by the zone brake or the rate limit",
            m.force_delete_suppressed_total.clone(),
        );
        m
    }

    /// Metrics that are not exposed anywhere (tests, `plan`).
    #[cfg(test)]
    pub(crate) fn unregistered() -> Self {
        Self::register(&mut Registry::default())
    }

    pub(crate) fn reconciled(&self, controller: &str, result: &str, seconds: f64) {
        let c = ControllerLabels { controller: controller.to_string() };
        self.reconcile_total
            .get_or_create(&ReconcileLabels { controller: c.controller.clone(), result: result.into() })
            .inc();
        if result == "error" {
            self.reconcile_errors_total.get_or_create(&c).inc();
        }
        self.reconcile_time_seconds.get_or_create(&c).observe(seconds);
    }

    /// Sets the gauges from the planner's observations (every label set seen keeps a series).
    pub(crate) fn set_gauges(&self, counts: &HashMap<Observation, i64>) {
        for (o, n) in counts {
            match o {
                Observation::TtlScheduled(kind) => {
                    self.ttl_scheduled_jobs.get_or_create(&KindLabels { kind: kind.to_string() }).set(*n);
                }
                Observation::SuspendStuck(kind) => {
                    self.suspend_not_reconciled_jobs.get_or_create(&KindLabels { kind: kind.to_string() }).set(*n);
                }
                Observation::AdmittedSuspended(kind) => {
                    self.admitted_but_suspended_jobs.get_or_create(&KindLabels { kind: kind.to_string() }).set(*n);
                }
                Observation::JobSetRecreated => {
                    self.jobset_recreated_after_failure_trainjobs
                        .get_or_create(&KindLabels { kind: "TrainJob".to_string() })
                        .set(*n);
                }
                Observation::PodStuck(state) => {
                    self.pods_stuck_terminating
                        .get_or_create(&NodeStateLabels { node_state: state.as_str().to_string() })
                        .set(*n);
                }
            }
        }
    }

    /// Drops every series of the gauges only the leader computes, so a replica that stopped
    /// leading exports none of them (instead of its last values).
    pub(crate) fn clear_leader_gauges(&self) {
        self.ttl_scheduled_jobs.clear();
        self.suspend_not_reconciled_jobs.clear();
        self.admitted_but_suspended_jobs.clear();
        self.jobset_recreated_after_failure_trainjobs.clear();
        self.pods_stuck_terminating.clear();
    }

    pub(crate) fn ttl_deletion(&self, kind: &str, result: &str) {
        self.ttl_deletions_total.get_or_create(&KindResultLabels { kind: kind.into(), result: result.into() }).inc();
    }

    pub(crate) fn force_deletion(&self, result: &str) {
        self.pod_force_deletions_total.get_or_create(&ResultLabels { result: result.into() }).inc();
    }

    pub(crate) fn suppressed(&self, reason: &str) {
        self.force_delete_suppressed_total.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
    }

    pub(crate) fn set_leader(&self, lease: &str, leader: bool) {
        self.leader_election_master_status.get_or_create(&NameLabels { name: lease.into() }).set(i64::from(leader));
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;
    use trainguard_core::planner::NodeState;

    #[test]
    fn names_match_controller_runtime_and_spec() {
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry);
        m.reconciled("pytorchjob", "success", 0.001);
        m.reconciled("pod", "error", 0.01);
        m.set_leader("trainguard-controller", true);
        m.ttl_deletion("PyTorchJob", "deleted");
        m.ttl_deletion_delay_seconds.observe(3.0);
        m.set_gauges(
            &[(Observation::PodStuck(NodeState::Unreachable), 2), (Observation::TtlScheduled("TFJob"), 1)].into(),
        );
        m.force_deletion("deleted");
        m.suppressed("zone-brake");
        m.set_gauges(&[(Observation::SuspendStuck("TrainJob"), 1)].into());
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for want in [
            r#"controller_runtime_reconcile_total{controller="pytorchjob",result="success"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="pod"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="pod"} 1"#,
            r#"leader_election_master_status{name="trainguard-controller"} 1"#,
            r#"trainguard_ttl_deletions_total{kind="PyTorchJob",result="deleted"} 1"#,
            "trainguard_ttl_deletion_delay_seconds_count 1",
            r#"trainguard_ttl_scheduled_jobs{kind="TFJob"} 1"#,
            r#"trainguard_suspend_not_reconciled_jobs{kind="TrainJob"} 1"#,
            r#"trainguard_pods_stuck_terminating{node_state="unreachable"} 2"#,
            r#"trainguard_pod_force_deletions_total{result="deleted"} 1"#,
            r#"trainguard_force_delete_suppressed_total{reason="zone-brake"} 1"#,
        ] {
            assert!(text.contains(want), "missing {want} in:\n{text}");
        }
    }
}
