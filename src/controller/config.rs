//! The controller's knobs (docs/controller.md (Events, Metrics and Knobs)): clap flags, each also an env var `TRAINGUARD_<FLAG>`, and the
//! plain [`PlanConfig`] the planner reads. `serve` flattens [`ControllerArgs`]; `plan` takes the
//! planner's part of it, so a dry run uses the very same flags.

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, ValueEnum};
use k8s_openapi::jiff::SignedDuration;
use trainguard_core::duration::parse_signed;

pub use trainguard_core::planner::config::{Mode, NodeFailureMode, PlanConfig, Propagation};

/// `--controller-mode`: the planner's [`Mode`], with the help `--help` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Act,
    Report,
}

impl From<ModeArg> for Mode {
    fn from(arg: ModeArg) -> Mode {
        match arg {
            ModeArg::Act => Mode::Act,
            ModeArg::Report => Mode::Report,
        }
    }
}

/// `--node-failure`: the planner's [`NodeFailureMode`], plus a deprecated spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum NodeFailureArg {
    /// Missing, out-of-service, or kubelet gone (`Ready` Unknown/absent with the `unreachable`
    /// NoExecute taint) past `--node-not-ready-for`: the nodes Kueue's own force delete trusts.
    Unreachable,
    /// Also a node whose kubelet still reports `Ready=False` with the `not-ready` NoExecute taint.
    NotReady,
    /// Only what Kubernetes' own PodGC trusts: missing or `node.kubernetes.io/out-of-service`.
    OutOfService,
    /// Never escalate; stuck pods are still reported.
    Off,
    /// Deprecated spelling of `not-ready`; read as `not-ready`, with a warning.
    #[value(hide = true)]
    NodeUnhealthy,
}

impl From<NodeFailureArg> for NodeFailureMode {
    /// A deprecated spelling is read as its replacement.
    fn from(arg: NodeFailureArg) -> NodeFailureMode {
        match arg {
            NodeFailureArg::Unreachable => NodeFailureMode::Unreachable,
            NodeFailureArg::NotReady | NodeFailureArg::NodeUnhealthy => NodeFailureMode::NotReady,
            NodeFailureArg::OutOfService => NodeFailureMode::OutOfService,
            NodeFailureArg::Off => NodeFailureMode::Off,
        }
    }
}

/// `--ttl-propagation`: the planner's [`Propagation`], in Kubernetes' spelling (lower case too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PropagationArg {
    /// Delete the job now, its pods in the background
    #[value(name = "Background", alias = "background")]
    Background,
    /// Delete the pods first, then the job
    #[value(name = "Foreground", alias = "foreground")]
    Foreground,
    /// Delete the job, leave its pods
    #[value(name = "Orphan", alias = "orphan")]
    Orphan,
}

impl From<PropagationArg> for Propagation {
    fn from(arg: PropagationArg) -> Propagation {
        match arg {
            PropagationArg::Background => Propagation::Background,
            PropagationArg::Foreground => Propagation::Foreground,
            PropagationArg::Orphan => Propagation::Orphan,
        }
    }
}

/// The planner's flags, shared by `serve` and `plan`.
#[derive(Debug, Clone, Args)]
pub struct PlannerArgs {
    /// `report` (default) does everything but the writes and emits `Would…` events; `act` performs
    /// the actions (TTL deletes, force deletes of stuck pods) with the credentials it runs with.
    #[arg(long, env = "TRAINGUARD_CONTROLLER_MODE", value_enum, default_value = "report")]
    pub controller_mode: ModeArg,

    /// Delete finished jobs whose `ttlSecondsAfterFinished` has passed (a backstop for the operator).
    #[arg(long, env = "TRAINGUARD_TTL", action = ArgAction::Set, value_parser = BoolishValueParser::new(),
          default_value = "true", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) ttl: bool,

    /// Extra wait after a job's TTL expires, so an operator that does its own TTL acts first.
    #[arg(long, env = "TRAINGUARD_TTL_GRACE", value_parser = parse_signed, default_value = "30s")]
    pub(crate) ttl_grace: SignedDuration,

    /// Propagation policy of the TTL delete.
    #[arg(long, env = "TRAINGUARD_TTL_PROPAGATION", value_enum, default_value = "Background")]
    pub(crate) ttl_propagation: PropagationArg,

    /// How long a suspended job may keep pods or lack its Suspended condition before it is reported.
    #[arg(long, env = "TRAINGUARD_SUSPEND_STUCK_AFTER", value_parser = parse_signed, default_value = "2m")]
    pub(crate) suspend_stuck_after: SignedDuration,

    /// Opt-in remedy: move ttlSecondsAfterFinished of a stuck suspended job into an annotation,
    /// and back when the job is resumed.
    #[arg(long, env = "TRAINGUARD_STASH_TTL_ON_STUCK_SUSPEND", action = ArgAction::Set,
          value_parser = BoolishValueParser::new(), default_value = "false", num_args = 0..=1,
          default_missing_value = "true")]
    pub(crate) stash_ttl_on_stuck_suspend: bool,

    /// How long a Kueue Workload may be Admitted while its job stays suspended before it is reported.
    #[arg(long, env = "TRAINGUARD_ADMITTED_SUSPENDED_AFTER", value_parser = parse_signed, default_value = "5m")]
    pub(crate) admitted_suspended_after: SignedDuration,

    /// Which node states allow force-deleting a training pod stuck Terminating on them
    /// (`node-unhealthy`, deprecated, is read as `not-ready`).
    #[arg(long, env = "TRAINGUARD_NODE_FAILURE", value_enum, default_value = "unreachable")]
    pub(crate) node_failure: NodeFailureArg,

    /// How long a node must be NotReady (with the NoExecute taint) before it counts as unhealthy.
    #[arg(long, env = "TRAINGUARD_NODE_NOT_READY_FOR", value_parser = parse_signed, default_value = "5m")]
    pub(crate) node_not_ready_for: SignedDuration,

    /// How long past its deletionTimestamp a pod must be stuck before its deletion is escalated.
    #[arg(long, env = "TRAINGUARD_FORCE_DELETE_AFTER", value_parser = parse_signed, default_value = "2m")]
    pub(crate) force_delete_after: SignedDuration,

    /// Safety brake: pause force deletes in a zone when more than 2 of its nodes, and at least this
    /// fraction, are unhealthy.
    #[arg(long, env = "TRAINGUARD_PAUSE_UNHEALTHY_FRACTION", value_parser = parse_fraction, default_value = "0.55")]
    pub(crate) pause_unhealthy_fraction: f64,

    /// Rate limit of force deletes (token bucket, this many per minute, bursting to as many).
    #[arg(long, env = "TRAINGUARD_MAX_FORCE_DELETES_PER_MINUTE", default_value_t = 20)]
    pub(crate) max_force_deletes_per_minute: u32,
}

impl PlannerArgs {
    /// `--controller-mode`, as the planner reads it.
    pub fn mode(&self) -> Mode {
        self.controller_mode.into()
    }

    /// Warnings about deprecated flag values, for the caller to log once at start.
    pub(crate) fn deprecations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.node_failure == NodeFailureArg::NodeUnhealthy {
            out.push(
                "--node-failure=node-unhealthy is deprecated: it is read as --node-failure=not-ready; the default is \
                 now unreachable (set --node-failure=not-ready to keep acting on nodes whose kubelet still reports)"
                    .to_string(),
            );
        }
        out
    }

    pub(crate) fn plan_config(&self) -> PlanConfig {
        PlanConfig {
            mode: self.mode(),
            ttl: self.ttl,
            ttl_grace: self.ttl_grace,
            ttl_propagation: self.ttl_propagation.into(),
            suspend_stuck_after: self.suspend_stuck_after,
            stash_ttl_on_stuck_suspend: self.stash_ttl_on_stuck_suspend,
            admitted_suspended_after: self.admitted_suspended_after,
            node_failure: self.node_failure.into(),
            node_not_ready_for: self.node_not_ready_for,
            force_delete_after: self.force_delete_after,
            pause_unhealthy_fraction: self.pause_unhealthy_fraction,
            max_force_deletes_per_minute: self.max_force_deletes_per_minute,
        }
    }
}

/// Every controller knob of `trainguard serve` (docs/controller.md (Events, Metrics and Knobs)). `serve` flattens this group.
#[derive(Debug, Clone, Args)]
pub struct ControllerArgs {
    /// Run the companion controller (on the elected leader only).
    #[arg(long = "controller", env = "TRAINGUARD_CONTROLLER", action = ArgAction::Set,
          value_parser = BoolishValueParser::new(), default_value = "true", num_args = 0..=1,
          default_missing_value = "true")]
    pub enabled: bool,

    #[command(flatten)]
    pub planner: PlannerArgs,

    /// Elect a leader through a Lease before running the controller. Unset: `serve` decides (on in a
    /// cluster, off with --dev/--offline).
    #[arg(long, env = "TRAINGUARD_LEADER_ELECT", value_parser = BoolishValueParser::new(), num_args = 0..=1,
          default_missing_value = "true")]
    pub leader_elect: Option<bool>,

    /// Name of the Lease used for leader election.
    #[arg(long, env = "TRAINGUARD_LEASE_NAME", default_value = "trainguard-controller")]
    pub lease_name: String,

    /// Namespace of the Lease; default: the pod's own namespace (POD_NAMESPACE), else trainguard-system.
    #[arg(long, env = "TRAINGUARD_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// Watch and act only in these namespaces (comma-separated), each watched on its own so that
    /// RoleBindings there suffice; nodes are still watched cluster-wide. Unset: every namespace.
    #[arg(long, env = "TRAINGUARD_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,
}

impl ControllerArgs {
    /// `--lease-namespace`, else `$POD_NAMESPACE`, else `trainguard-system`.
    pub fn lease_namespace(&self) -> String {
        resolve_lease_namespace(self.lease_namespace.as_deref(), std::env::var("POD_NAMESPACE").ok().as_deref())
    }
}

pub fn resolve_lease_namespace(flag: Option<&str>, pod_namespace: Option<&str>) -> String {
    flag.filter(|s| !s.is_empty())
        .or(pod_namespace.filter(|s| !s.is_empty()))
        .unwrap_or("trainguard-system")
        .to_string()
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text.trim().parse().map_err(|_| format!("invalid fraction {text:?}: expected a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("invalid fraction {text:?}: must be between 0 and 1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions() {
        assert_eq!(parse_fraction("0.55"), Ok(0.55));
        assert!(parse_fraction("1.5").unwrap_err().contains("between 0 and 1"));
        assert!(parse_fraction("x").unwrap_err().contains("expected a number"));
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    fn parse(argv: &[&str]) -> ControllerArgs {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("t").chain(argv.iter().copied())).unwrap().args
    }

    #[test]
    fn flags_and_defaults() {
        let d = parse(&[]);
        assert!(d.enabled && d.planner.ttl && !d.planner.stash_ttl_on_stuck_suspend);
        assert_eq!(d.leader_elect, None);
        assert_eq!(d.lease_name, "trainguard-controller");
        assert_eq!(d.planner.plan_config(), PlanConfig::default());
        assert_eq!(d.planner.plan_config().mode, Mode::Report, "no writes unless act is asked for");
        assert_eq!(parse(&["--controller-mode=act"]).planner.plan_config().mode, Mode::Act);
        assert!(!parse(&["--controller=false"]).enabled);
        assert!(!parse(&["--ttl=no"]).planner.ttl);
        assert!(parse(&["--stash-ttl-on-stuck-suspend"]).planner.stash_ttl_on_stuck_suspend);
        assert_eq!(parse(&["--leader-elect"]).leader_elect, Some(true));
        assert_eq!(parse(&["--leader-elect=false"]).leader_elect, Some(false));
        assert!(d.namespaces.is_empty(), "every namespace unless listed");
        assert_eq!(parse(&["--namespaces", "team-a,team-b"]).namespaces, ["team-a", "team-b"]);
        let c = parse(&[
            "--controller-mode=report",
            "--node-failure=out-of-service",
            "--force-delete-after=90s",
            "--pause-unhealthy-fraction=0.7",
            "--max-force-deletes-per-minute=5",
            "--ttl-propagation=foreground",
            "--admitted-suspended-after=90s",
        ])
        .planner
        .plan_config();
        assert_eq!(c.mode, Mode::Report);
        assert_eq!(c.node_failure, NodeFailureMode::OutOfService);
        assert_eq!(c.force_delete_after, SignedDuration::from_secs(90));
        assert_eq!(c.pause_unhealthy_fraction, 0.7);
        assert_eq!(c.max_force_deletes_per_minute, 5);
        assert_eq!(c.ttl_propagation, Propagation::Foreground);
        assert_eq!(c.admitted_suspended_after, SignedDuration::from_secs(90));
        assert_eq!(parse(&["--ttl-propagation", "Orphan"]).planner.plan_config().ttl_propagation, Propagation::Orphan);
        assert!(parse(&[]).planner.deprecations().is_empty());
    }

    #[test]
    fn node_failure_values_and_the_deprecated_alias() {
        let cases = [
            (None, NodeFailureMode::Unreachable, false),
            (Some("unreachable"), NodeFailureMode::Unreachable, false),
            (Some("not-ready"), NodeFailureMode::NotReady, false),
            (Some("out-of-service"), NodeFailureMode::OutOfService, false),
            (Some("off"), NodeFailureMode::Off, false),
            (Some("node-unhealthy"), NodeFailureMode::NotReady, true),
        ];
        for (value, want, deprecated) in cases {
            let flag = value.map(|v| format!("--node-failure={v}"));
            let argv: Vec<&str> = flag.iter().map(String::as_str).collect();
            let args = parse(&argv).planner;
            assert_eq!(args.plan_config().node_failure, want, "{value:?}");
            let warnings = args.deprecations();
            assert_eq!(warnings.len(), usize::from(deprecated), "{value:?}: {warnings:?}");
            if deprecated {
                assert!(warnings[0].contains("read as --node-failure=not-ready"), "{warnings:?}");
            }
        }
        use clap::Parser;
        let err = Cli::try_parse_from(["t", "--node-failure=sometimes"]).err().expect("rejected");
        assert!(err.to_string().contains("unreachable"), "{err}");
    }

    #[test]
    fn lease_namespace() {
        let cases = [
            (Some("ns-flag"), Some("ns-pod"), "ns-flag"),
            (None, Some("ns-pod"), "ns-pod"),
            (None, None, "trainguard-system"),
            (Some(""), Some(""), "trainguard-system"),
        ];
        for (flag, pod, want) in cases {
            assert_eq!(resolve_lease_namespace(flag, pod), want);
        }
    }
}
