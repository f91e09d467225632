//! Every Kubernetes API call the binary makes, in one table (docs/controller.md (API calls)). The executor's
//! mock-API tests check each call they see against it, and the deploy test checks that the
//! webhook's ClusterRole, the controller's ClusterRole and Lease Role, and the optional TTL-stash
//! ClusterRole grant exactly this, each to the process that makes the call ([`By`]).

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
    /// Which feature needs it.
    pub(crate) purpose: &'static str,
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

pub const API_CALLS: &[ApiCall] = &[
    ApiCall {
        group: "kubeflow.org",
        resource: "tfjobs",
        verbs: TRAINING_OPERATOR_VERBS,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: TTL, suspend report, node failure",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "pytorchjobs",
        verbs: TRAINING_OPERATOR_VERBS,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: TTL, suspend report, node failure",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "mpijobs",
        verbs: TRAINING_OPERATOR_VERBS,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: TTL, suspend report, node failure",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "xgboostjobs",
        verbs: TRAINING_OPERATOR_VERBS,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: TTL, suspend report, node failure",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "paddlejobs",
        verbs: TRAINING_OPERATOR_VERBS,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: TTL, suspend report, node failure",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "jaxjobs",
        verbs: TRAINING_OPERATOR_VERBS,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: TTL, suspend report, node failure",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "tfjobs",
        verbs: &["patch"],
        scope: Scope::ClusterTtlStash,
        by: By::Controller,
        purpose: "controller: TTL stash remedy (opt-in)",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "pytorchjobs",
        verbs: &["patch"],
        scope: Scope::ClusterTtlStash,
        by: By::Controller,
        purpose: "controller: TTL stash remedy (opt-in)",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "mpijobs",
        verbs: &["patch"],
        scope: Scope::ClusterTtlStash,
        by: By::Controller,
        purpose: "controller: TTL stash remedy (opt-in)",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "xgboostjobs",
        verbs: &["patch"],
        scope: Scope::ClusterTtlStash,
        by: By::Controller,
        purpose: "controller: TTL stash remedy (opt-in)",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "paddlejobs",
        verbs: &["patch"],
        scope: Scope::ClusterTtlStash,
        by: By::Controller,
        purpose: "controller: TTL stash remedy (opt-in)",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "jaxjobs",
        verbs: &["patch"],
        scope: Scope::ClusterTtlStash,
        by: By::Controller,
        purpose: "controller: TTL stash remedy (opt-in)",
    },
    ApiCall {
        group: "trainer.kubeflow.org",
        resource: "trainjobs",
        verbs: TRAINING_OPERATOR_VERBS,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: TrainJob TTL (get: live re-check before the delete), suspend report",
    },
    ApiCall {
        group: "jobset.x-k8s.io",
        resource: "jobsets",
        verbs: WATCH,
        scope: Scope::Cluster,
        by: By::Both,
        purpose: "webhook gate (G1, G2); controller: TrainJob pods",
    },
    ApiCall {
        group: "batch",
        resource: "jobs",
        verbs: &["list", "watch"],
        scope: Scope::Cluster,
        by: By::Both,
        purpose: "webhook gate (G3, G5); controller: TrainJob pods",
    },
    ApiCall {
        group: "",
        resource: "pods",
        verbs: READ,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: node failure",
    },
    ApiCall {
        group: "",
        resource: "pods/status",
        verbs: &["patch"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller: node failure (phase Failed before force delete)",
    },
    ApiCall {
        group: "",
        resource: "nodes",
        verbs: READ,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: node failure",
    },
    ApiCall {
        group: "kueue.x-k8s.io",
        resource: "workloads",
        verbs: WATCH,
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: Kueue guards",
    },
    ApiCall {
        group: "events.k8s.io",
        resource: "events",
        verbs: &["create", "patch"],
        scope: Scope::Cluster,
        by: By::Controller,
        purpose: "controller: events",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "tfjobs",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: TTL delete",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "pytorchjobs",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: TTL delete",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "mpijobs",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: TTL delete",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "xgboostjobs",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: TTL delete",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "paddlejobs",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: TTL delete",
    },
    ApiCall {
        group: "kubeflow.org",
        resource: "jaxjobs",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: TTL delete",
    },
    ApiCall {
        group: "trainer.kubeflow.org",
        resource: "trainjobs",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: TTL delete",
    },
    ApiCall {
        group: "",
        resource: "pods",
        verbs: &["delete"],
        scope: Scope::ClusterAct,
        by: By::Controller,
        purpose: "controller, act mode: node failure (force delete)",
    },
    ApiCall {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "create", "patch"],
        scope: Scope::LeaseNamespace,
        by: By::Controller,
        purpose: "leader election (kube-lease-manager patches, never updates)",
    },
];

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
