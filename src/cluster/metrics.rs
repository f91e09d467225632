//! The caches' own metrics: how many objects each holds, whether it has synced, and what its watch
//! ran into. Registered beside the webhook's (`/metrics` shows both).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    pub cache: &'static str,
}

#[derive(Debug, Clone, Default)]
pub struct CacheMetrics {
    pub objects: Family<CacheLabels, Gauge>,
    pub synced: Family<CacheLabels, Gauge>,
    pub watch_errors: Family<CacheLabels, Counter>,
    /// 1 while a cache's resource is not served (its CRD is not installed).
    pub resource_absent: Family<CacheLabels, Gauge>,
    /// A cache's resource answered 404 after the cache had synced with it present.
    pub resource_vanished: Family<CacheLabels, Counter>,
}

impl CacheMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = CacheMetrics::default();
        registry.register("trainguard_cache_objects", "Objects held by each watch-fed cache", m.objects.clone());
        registry.register(
            "trainguard_cache_synced",
            "1 once a cache has listed its objects (or found its CRD absent), else 0",
            m.synced.clone(),
        );
        registry.register(
            "trainguard_cache_watch_errors",
            "Errors seen by the watch feeding each cache",
            m.watch_errors.clone(),
        );
        registry.register(
            "trainguard_cache_resource_absent",
            "1 while the resource a cache watches is not served by the API server (CRD not installed)",
            m.resource_absent.clone(),
        );
        registry.register(
            "trainguard_cache_resource_vanished",
            "Times a cache's resource answered 404 after the cache had synced with it present (relisted)",
            m.resource_vanished.clone(),
        );
        m
    }
}
