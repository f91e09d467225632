//! Argument groups shared by several commands. Every flag is also an environment variable
//! `TRAINGUARD_<FLAG>`.

use clap::Args;

use trainguard_core::admission::{RulesConfig, SuspendRule};
use trainguard_core::model::{DEFAULT_MANAGED_BY, DEFAULT_OPT_OUT_GROUPS, MULTIKUEUE_MANAGED_BY};
use trainguard_core::trainer::TrainerVersion;

/// `--suspend-rule`: the rules' [`SuspendRule`], with the help `--help` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SuspendRuleArg {
    /// Either old or new suspended is enough (Trainer ≥ v2.2.1 semantics); U4 goes through the gate.
    Either,
    /// The new object must be suspended (Trainer v2.0 parity); U4 is denied.
    New,
}

impl From<SuspendRuleArg> for SuspendRule {
    fn from(arg: SuspendRuleArg) -> SuspendRule {
        match arg {
            SuspendRuleArg::Either => SuspendRule::Either,
            SuspendRuleArg::New => SuspendRule::New,
        }
    }
}

/// `--trainer-version`: a [`TrainerVersion`], with the help `--help` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum TrainerVersionArg {
    /// v2.0.x: `spec.podSpecOverrides`.
    #[value(name = "v2.0")]
    V2_0,
    /// v2.1.x: `spec.podTemplateOverrides`.
    #[value(name = "v2.1")]
    V2_1,
    /// v2.2.x: `spec.runtimePatches`.
    #[value(name = "v2.2")]
    V2_2,
    /// v2.3.x: `spec.runtimePatches`, whose pod spec has `terminationGracePeriodSeconds`.
    #[default]
    #[value(name = "v2.3")]
    V2_3,
}

impl From<TrainerVersionArg> for TrainerVersion {
    fn from(arg: TrainerVersionArg) -> TrainerVersion {
        match arg {
            TrainerVersionArg::V2_0 => TrainerVersion::V2_0,
            TrainerVersionArg::V2_1 => TrainerVersion::V2_1,
            TrainerVersionArg::V2_2 => TrainerVersion::V2_2,
            TrainerVersionArg::V2_3 => TrainerVersion::V2_3,
        }
    }
}

/// Options that change admission verdicts; `serve`, `validate` and `review` take the same ones so
/// CI and the cluster agree.
#[derive(Debug, Clone, Args)]
pub struct RulesArgs {
    /// Whether a change of the overrides may come with spec.suspend=false in the same update:
    /// `either` (Trainer >= v2.2.1) lets it through the JobSet gate, `new` (Trainer v2.0) denies it.
    #[arg(long, env = "TRAINGUARD_SUSPEND_RULE", value_enum, default_value = "either")]
    pub suspend_rule: SuspendRuleArg,

    /// Values spec.managedBy may take when a TrainJob is created (comma-separated or repeated).
    #[arg(
        long,
        env = "TRAINGUARD_ALLOWED_MANAGED_BY",
        value_delimiter = ',',
        default_values_t = [DEFAULT_MANAGED_BY.to_string(), MULTIKUEUE_MANAGED_BY.to_string()]
    )]
    pub allowed_managed_by: Vec<String>,

    /// Groups (request.userInfo.groups) whose members may add the opt-out label
    /// trainguard.io/webhook to a TrainJob or change its value (comma-separated or repeated).
    /// Removing it is allowed to everyone.
    #[arg(
        long,
        env = "TRAINGUARD_OPT_OUT_GROUPS",
        value_delimiter = ',',
        default_values_t = DEFAULT_OPT_OUT_GROUPS.iter().map(|g| g.to_string())
    )]
    pub opt_out_groups: Vec<String>,
}

impl RulesArgs {
    pub(crate) fn rules_config(&self) -> RulesConfig {
        RulesConfig {
            suspend_rule: self.suspend_rule.into(),
            allowed_managed_by: self.allowed_managed_by.clone(),
            opt_out_groups: self.opt_out_groups.clone(),
        }
    }
}
