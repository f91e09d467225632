//! Every Kubernetes API call the binary makes, in one table (docs/controller.md (API calls)). The
//! executor's mock-API tests check each call they see against it. The RBAC under deploy/ comes from
//! it: `cargo run --example gen_rbac` writes the rules of every Role and ClusterRole of the
//! kustomize files and the Helm chart from these rows, and their bindings, each to the process that
//! makes the call ([`By`]), and `tests/cli/rbac.rs` fails while a file differs.

use std::sync::LazyLock;

/// One group/resource and the verbs trainguard uses on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiCall {
    /// API group; `""` is the core group.
    pub group: &'static str,
    /// Resource (plural), with `/subresource` where one is used.
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    /// Cluster-wide (ClusterRole) or only in the Lease namespace (Role).
    pub scope: Scope,
    /// Which process makes it: what the webhook Deployment (`serve --controller=false`) and the
    /// controller Deployment (`serve --webhook=false`) are each granted.
    pub by: By,
    /// Which feature needs it (the comment above its rule in the generated RBAC).
    pub purpose: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// The admission webhook only (its JobSet gate's caches).
    Webhook,
    /// The companion controller only.
    Controller,
    /// Both.
    Both,
}

impl By {
    pub fn webhook(self) -> bool {
        matches!(self, By::Webhook | By::Both)
    }

    pub fn controller(self) -> bool {
        matches!(self, By::Controller | By::Both)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Cluster,
    LeaseNamespace,
    /// Cluster-wide, granted only by the optional component for `--stash-ttl-on-stuck-suspend`.
    ClusterTtlStash,
    /// Cluster-wide, granted only to a controller in `act` mode (kustomize component `act`, Helm
    /// `controller.mode: act`): the deletes and the status patch. A `report` install writes only
    /// Events and its Lease.
    ClusterAct,
}

/// GET: the live re-check before each delete (TTL) and patch (stash). Also the TrainJob TTL's.
/// The delete itself is an [`Scope::ClusterAct`] row.
const TRAINING_OPERATOR_VERBS: &[&str] = &["get", "list", "watch"];
const READ: &[&str] = &["get", "list", "watch"];
/// Watched into caches only; never read one by one.
const WATCH: &[&str] = &["list", "watch"];

/// The Kubeflow Training Operator v1 kinds the controller reads, TTL-deletes (act mode) and, with the
/// opt-in remedy, patches.
const TRAINING_OPERATOR_RESOURCES: [&str; 6] =
    ["tfjobs", "pytorchjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs"];

pub static API_CALLS: LazyLock<Vec<ApiCall>> = LazyLock::new(|| {
    let call = |group, resource, verbs, scope, by, purpose| ApiCall { group, resource, verbs, scope, by, purpose };
    let v1_jobs = |verbs, scope, purpose| {
        TRAINING_OPERATOR_RESOURCES
            .map(|resource| call("kubeflow.org", resource, verbs, scope, By::Controller, purpose))
    };
    let mut calls = Vec::new();
    calls.extend(v1_jobs(TRAINING_OPERATOR_VERBS, Scope::Cluster, "controller: TTL, suspend report, node failure"));
    calls.extend(v1_jobs(&["patch"], Scope::ClusterTtlStash, "controller: TTL stash remedy (opt-in)"));
    calls.extend([
        call(
            "trainer.kubeflow.org",
            "trainjobs",
            TRAINING_OPERATOR_VERBS,
            Scope::Cluster,
            By::Controller,
            "controller: TrainJob TTL (get: live re-check before the delete), suspend report",
        ),
        call(
            "jobset.x-k8s.io",
            "jobsets",
            WATCH,
            Scope::Cluster,
            By::Both,
            "webhook gate (G1, G2); controller: TrainJob pods",
        ),
        call("batch", "jobs", WATCH, Scope::Cluster, By::Both, "webhook gate (G3, G5); controller: TrainJob pods"),
        call("", "pods", READ, Scope::Cluster, By::Controller, "controller: node failure (the stuck pods)"),
        call("", "nodes", READ, Scope::Cluster, By::Controller, "controller: node failure (which nodes are not Ready)"),
        call("kueue.x-k8s.io", "workloads", WATCH, Scope::Cluster, By::Controller, "controller: Kueue guards"),
        call("events.k8s.io", "events", &["create", "patch"], Scope::Cluster, By::Controller, "controller: events"),
    ]);
    calls.extend(v1_jobs(&["delete"], Scope::ClusterAct, "controller, act mode: TTL delete"));
    calls.extend([
        call(
            "trainer.kubeflow.org",
            "trainjobs",
            &["delete"],
            Scope::ClusterAct,
            By::Controller,
            "controller, act mode: TTL delete",
        ),
        call(
            "",
            "pods",
            &["delete"],
            Scope::ClusterAct,
            By::Controller,
            "controller, act mode: node failure (force delete)",
        ),
        call(
            "",
            "pods/status",
            &["patch"],
            Scope::ClusterAct,
            By::Controller,
            "controller, act mode: node failure (phase Failed before the force delete)",
        ),
        call(
            "coordination.k8s.io",
            "leases",
            &["get", "create", "patch"],
            Scope::LeaseNamespace,
            By::Controller,
            "leader election (kube-lease-manager patches, never updates)",
        ),
    ]);
    calls
});

/// The cluster-scoped resources of the table. With a namespace allow-list (`--namespaces`) the
/// controller still reads these cluster-wide (their own ClusterRole and ClusterRoleBinding); every
/// other `Cluster`, `ClusterAct` and `ClusterTtlStash` row is then granted only in the listed
/// namespaces, by RoleBindings to the same ClusterRoles, and requested only there.
pub const CLUSTER_SCOPED: &[&str] = &["nodes"];

/// Whether `resource` is cluster-scoped (see [`CLUSTER_SCOPED`]).
pub fn cluster_scoped(resource: &str) -> bool {
    CLUSTER_SCOPED.contains(&resource)
}

/// Whether `verb` on `group`/`resource` is in the table.
pub fn allowed(group: &str, resource: &str, verb: &str) -> bool {
    API_CALLS.iter().any(|c| c.group == group && c.resource == resource && c.verbs.contains(&verb))
}
