//! What this binary is: the crate version and the git commit it was built from (build.rs).

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("TRAINGUARD_GIT_COMMIT");
/// `trainguard --version`: "0.1.0 (commit 1a2b3c4d5e6f)".
pub(crate) const LONG_VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("TRAINGUARD_GIT_COMMIT"), ")");

#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

/// `trainguard_build_info{version,commit} 1`: joins any series to the build that produced it.
pub fn register(registry: &mut prometheus_client::registry::Registry) {
    let info =
        prometheus_client::metrics::family::Family::<BuildLabels, prometheus_client::metrics::gauge::Gauge>::default();
    info.get_or_create(&BuildLabels { version: VERSION, commit: COMMIT }).set(1);
    registry.register("trainguard_build_info", "1, labelled with the version and git commit of this binary", info);
}
