//! Argument groups shared by several commands. Every flag is also an environment variable
//! `TRAINGUARD_<FLAG>`.

use clap::Args;

use crate::admission::{RulesConfig, SuspendRule};
use crate::model::{DEFAULT_MANAGED_BY, DEFAULT_OPT_OUT_GROUPS, MULTIKUEUE_MANAGED_BY};

/// Options that change admission verdicts; `serve`, `validate` and `review` take the same ones so
/// CI and the cluster agree.
#[derive(Debug, Clone, Args)]
pub struct RulesArgs {
    /// Whether a change of the overrides may come with spec.suspend=false in the same update:
    /// `either` (Trainer >= v2.2.1) lets it through the JobSet gate, `new` (Trainer v2.0) denies it.
    #[arg(long, env = "TRAINGUARD_SUSPEND_RULE", value_enum, default_value_t = SuspendRule::Either)]
    pub suspend_rule: SuspendRule,

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
            suspend_rule: self.suspend_rule,
            allowed_managed_by: self.allowed_managed_by.clone(),
            opt_out_groups: self.opt_out_groups.clone(),
        }
    }
}
