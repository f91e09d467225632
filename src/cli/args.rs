//! Argument groups shared by several commands. Every flag is also an environment variable
//! `TRAINGUARD_<FLAG>`.

use std::sync::LazyLock;

use clap::Args;
use clap::builder::PossibleValue;

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

/// `--trainer-version`: a [`TrainerVersion`]. Its values and their `--help` lines are the core's
/// table of releases, so a release added there is a value here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TrainerVersionArg(pub(crate) TrainerVersion);

impl clap::ValueEnum for TrainerVersionArg {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: LazyLock<Vec<TrainerVersionArg>> =
            LazyLock::new(|| TrainerVersion::ALL.into_iter().map(TrainerVersionArg).collect());
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.help()))
    }
}

impl From<TrainerVersionArg> for TrainerVersion {
    fn from(arg: TrainerVersionArg) -> TrainerVersion {
        arg.0
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
