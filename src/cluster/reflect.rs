//! The cluster index: watch-fed caches of JobSets and their child Jobs, each object compacted
//! once into a record (`trainguard_core::index`) that holds what the gate reads and what the
//! controller's planner reads. The gate reads it through the [`ClusterView`] trait (memory only;
//! the watches run beside the admission path); a controller in the same process subscribes to it
//! ([`ClusterCache::subscribe`], [`ClusterCache::planner_contents`]) instead of watching the same
//! objects again, as kube-rs's shared reflector stores let several controllers share one watch.
//!
//! Readiness follows the first sync of each cache (a CRD that is not installed counts as synced
//! and empty). A watch that breaks later keeps the cache serving until it has been broken for
//! `stale_after`; after that, gated decisions answer "state unknown" (docs/webhook.md §4).
//!
//! A watch or list that is told 404 after the cache synced with the resource served (the CRD was
//! deleted, or a proxy answered for the API server) does not empty the cache on its word: the
//! watch is restarted with a fresh list, the cache counts as broken until a list (or further
//! watch events) succeed, and `trainguard_cache_resource_vanished_total` counts it. Only a list
//! that answers 404 before the first sync says the resource is absent (a CRD deleted on purpose
//! is then seen as absent after a restart).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::CacheStatus;
use super::metrics::{CacheLabels, CacheMetrics};
use trainguard_core::index::{ChildJobRecord, JobSetRecord};
use trainguard_core::model::jobset::{BatchJobView, JOBSET_NAME_LABEL, JobSetView};
use trainguard_core::planner::facts::{FactsError, NsName};
use trainguard_core::planner::snapshot::Change;
use trainguard_core::view::{ClusterView, GateFacts, JobSetWithJobs};

pub(crate) const JOBSETS: &str = "jobsets";
pub(crate) const JOBS: &str = "jobs";

/// The two kinds the index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexSource {
    JobSets,
    Jobs,
}

/// What the index tells its subscribers.
#[derive(Debug, Clone)]
pub enum IndexEvent {
    /// The planner's change for one object: its facts, or `None` when the planner no longer keeps
    /// it (deleted, or no longer controlled by a TrainJob or a JobSet). Boxed, as the controller's
    /// watch messages are: the buffer holds thousands of events.
    Changed(Box<Change>),
    /// The source's objects were replaced wholesale (a relist, or its CRD found absent): read
    /// them again with [`ClusterCache::planner_contents`].
    Resync(IndexSource),
}

/// Events a subscriber may fall behind by before it must read the index again.
const SUBSCRIBER_BUFFER: usize = 4096;

fn key(namespace: &str, name: &str) -> Box<str> {
    let mut k = String::with_capacity(namespace.len() + name.len() + 1);
    k.push_str(namespace);
    k.push('/');
    k.push_str(name);
    k.into_boxed_str()
}

/// Whether a watch has synced once, and since when it has been failing.
#[derive(Debug, Default)]
pub(crate) struct WatchHealth {
    synced: AtomicBool,
    broken_since: Mutex<Option<Instant>>,
}

impl WatchHealth {
    pub(crate) fn synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }

    fn mark_ok(&self) {
        *self.broken_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn mark_broken(&self, now: Instant) {
        self.broken_since.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(now);
    }

    /// Why this cache cannot be trusted at `now`, if it cannot.
    fn problem(&self, what: &str, now: Instant, stale_after: Duration) -> Option<String> {
        if !self.synced() {
            return Some(format!("the {what} cache has not synced yet"));
        }
        let since = (*self.broken_since.lock().unwrap_or_else(|e| e.into_inner()))?;
        let broken_for = now.saturating_duration_since(since);
        (broken_for > stale_after).then(|| format!("the {what} watch has been failing for {}s", broken_for.as_secs()))
    }
}

/// The two caches and their health.
pub struct ClusterCache {
    jobsets: RwLock<HashMap<Box<str>, JobSetRecord>>,
    /// Child Jobs keyed by `namespace/jobset-name`, each list sorted by Job name.
    jobs: RwLock<HashMap<Box<str>, Vec<ChildJobRecord>>>,
    jobset_health: WatchHealth,
    job_health: WatchHealth,
    stale_after: Duration,
    metrics: CacheMetrics,
    /// The planner's changes, for a controller in the same process.
    changes: broadcast::Sender<IndexEvent>,
}

impl ClusterCache {
    pub fn new(stale_after: Duration, metrics: CacheMetrics) -> Self {
        ClusterCache {
            jobsets: RwLock::default(),
            jobs: RwLock::default(),
            jobset_health: WatchHealth::default(),
            job_health: WatchHealth::default(),
            stale_after,
            metrics,
            changes: broadcast::Sender::new(SUBSCRIBER_BUFFER),
        }
    }

    /// Creates the caches and spawns their watches (cluster-wide) until `shutdown`.
    pub fn start(
        client: kube::Client,
        stale_after: Duration,
        metrics: CacheMetrics,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let cache = Arc::new(Self::new(stale_after, metrics));
        let jobsets: Api<JobSetView> = Api::all(client.clone());
        let jobs: Api<BatchJobView> = Api::all(client);
        let jobset_stream =
            move || watcher::watcher(jobsets.clone(), super::watch_config().any_semantic()).default_backoff();
        let job_stream = move || {
            watcher::watcher(jobs.clone(), super::watch_config().any_semantic().labels(JOBSET_NAME_LABEL))
                .default_backoff()
        };
        tokio::spawn(drive(cache.clone(), jobset_stream, JobSetSink, shutdown.clone()));
        tokio::spawn(drive(cache.clone(), job_stream, JobSink, shutdown));
        cache
    }

    pub fn jobset_count(&self) -> usize {
        self.jobsets.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn job_count(&self) -> usize {
        self.jobs.read().unwrap_or_else(|e| e.into_inner()).values().map(Vec::len).sum()
    }

    /// Inserts a JobSet as a watch event would (benches and tests use it to fill a cache).
    pub fn apply_jobset(&self, js: &JobSetView) {
        JobSetSink.apply(self, js, None);
    }

    /// The planner's changes from now on. Subscribe first, then read
    /// [`ClusterCache::planner_contents`]: a change made in between comes twice, which is harmless.
    pub fn subscribe(&self) -> broadcast::Receiver<IndexEvent> {
        self.changes.subscribe()
    }

    /// What the planner keeps of `source`: a change per object and the ids of them all (for a
    /// `Change::Relisted`); `None` until the source has synced.
    pub fn planner_contents(&self, source: IndexSource) -> Option<(Vec<Change>, HashSet<NsName>)> {
        let (changes, ids): (Vec<Change>, HashSet<NsName>) = match source {
            IndexSource::JobSets => {
                if !self.jobset_health.synced() {
                    return None;
                }
                let map = self.jobsets.read().unwrap_or_else(|e| e.into_inner());
                map.values().filter_map(|r| Some((r.planner_change()?, r.planner_id()?.clone()))).unzip()
            }
            IndexSource::Jobs => {
                if !self.job_health.synced() {
                    return None;
                }
                let map = self.jobs.read().unwrap_or_else(|e| e.into_inner());
                map.values().flatten().filter_map(|r| Some((r.planner_change()?, r.planner_id()?.clone()))).unzip()
            }
        };
        Some((changes, ids))
    }

    /// Tells the subscribers, if any (a process without a controller builds no change).
    fn publish(&self, event: impl FnOnce() -> Option<IndexEvent>) {
        if self.changes.receiver_count() > 0
            && let Some(event) = event()
        {
            let _ = self.changes.send(event);
        }
    }

    fn set_gauges(&self, cache: &'static str, objects: usize, synced: bool) {
        let labels = CacheLabels { cache };
        self.metrics.objects.get_or_create(&labels).set(objects as i64);
        self.metrics.synced.get_or_create(&labels).set(i64::from(synced));
    }
}

impl ClusterView for ClusterCache {
    fn gate_facts(&self, namespace: &str, name: &str) -> GateFacts {
        let now = Instant::now();
        let problems: Vec<String> = [
            self.jobset_health.problem("JobSet", now, self.stale_after),
            self.job_health.problem("Job", now, self.stale_after),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !problems.is_empty() {
            return GateFacts::Unknown { why: problems.join("; ") };
        }
        let k = key(namespace, name);
        let jobset = self.jobsets.read().unwrap_or_else(|e| e.into_inner()).get(&k).map(JobSetRecord::gate_state);
        let jobs = self
            .jobs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&k)
            .map(|jobs| jobs.iter().map(ChildJobRecord::gate_state).collect())
            .unwrap_or_default();
        GateFacts::Known(JobSetWithJobs { jobset, jobs })
    }
}

impl CacheStatus for ClusterCache {
    fn unsynced(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if !self.jobset_health.synced() {
            names.push(JOBSETS);
        }
        if !self.job_health.synced() {
            names.push(JOBS);
        }
        names
    }
}

/// How one watch's events change the cache. During a (re-)list the events go to a staging map
/// that replaces the live one at `InitDone`, so objects deleted while the watch was down vanish.
trait Sink<K>: Send + Sync + 'static {
    const NAME: &'static str;
    const SOURCE: IndexSource;
    type Map: Default + Send;
    fn health(cache: &ClusterCache) -> &WatchHealth;
    fn apply(&self, cache: &ClusterCache, obj: &K, staging: Option<&mut Self::Map>);
    fn delete(&self, cache: &ClusterCache, obj: &K);
    fn replace(&self, cache: &ClusterCache, map: Self::Map);
    fn clear(&self, cache: &ClusterCache) {
        self.replace(cache, Self::Map::default());
    }
    fn count(&self, cache: &ClusterCache) -> usize;
}

struct JobSetSink;

impl Sink<JobSetView> for JobSetSink {
    const NAME: &'static str = JOBSETS;
    const SOURCE: IndexSource = IndexSource::JobSets;
    type Map = HashMap<Box<str>, JobSetRecord>;

    fn health(cache: &ClusterCache) -> &WatchHealth {
        &cache.jobset_health
    }

    fn apply(&self, cache: &ClusterCache, js: &JobSetView, staging: Option<&mut Self::Map>) {
        let k = key(js.metadata.namespace.as_deref().unwrap_or(""), js.metadata.name.as_deref().unwrap_or(""));
        let (v, error) = JobSetRecord::from_view(js);
        match staging {
            Some(map) => {
                map.insert(k, v);
            }
            None => {
                let mut map = cache.jobsets.write().unwrap_or_else(|e| e.into_inner());
                cache.publish(|| {
                    planner_change(v.planner_change(), error, || Change::JobSet(id_of(&js.metadata), None))
                        .map(|c| IndexEvent::Changed(Box::new(c)))
                });
                map.insert(k, v);
            }
        }
    }

    fn delete(&self, cache: &ClusterCache, js: &JobSetView) {
        let k = key(js.metadata.namespace.as_deref().unwrap_or(""), js.metadata.name.as_deref().unwrap_or(""));
        let mut map = cache.jobsets.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&k);
        cache.publish(|| Some(IndexEvent::Changed(Box::new(Change::JobSet(id_of(&js.metadata), None)))));
    }

    fn replace(&self, cache: &ClusterCache, map: Self::Map) {
        *cache.jobsets.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    fn count(&self, cache: &ClusterCache) -> usize {
        cache.jobset_count()
    }
}

struct JobSink;

impl JobSink {
    /// Inserts or replaces the Job's record; a live change (not a list's) is published to
    /// `cache`'s subscribers.
    fn upsert(map: &mut HashMap<Box<str>, Vec<ChildJobRecord>>, job: &BatchJobView, live: Option<&ClusterCache>) {
        let Some(jobset) = job.jobset_name() else { return };
        let k = key(job.metadata.namespace.as_deref().unwrap_or(""), jobset);
        let (v, error) = ChildJobRecord::from_view(job);
        if let Some(cache) = live {
            cache.publish(|| {
                planner_change(v.planner_change(), error, || Change::BatchJob(id_of(&job.metadata), None))
                    .map(|c| IndexEvent::Changed(Box::new(c)))
            });
        }
        let list = map.entry(k).or_default();
        match list.binary_search_by(|j| j.name().cmp(v.name())) {
            Ok(i) => list[i] = v,
            Err(i) => list.insert(i, v),
        }
    }
}

impl Sink<BatchJobView> for JobSink {
    const NAME: &'static str = JOBS;
    const SOURCE: IndexSource = IndexSource::Jobs;
    type Map = HashMap<Box<str>, Vec<ChildJobRecord>>;

    fn health(cache: &ClusterCache) -> &WatchHealth {
        &cache.job_health
    }

    fn apply(&self, cache: &ClusterCache, job: &BatchJobView, staging: Option<&mut Self::Map>) {
        match staging {
            Some(map) => Self::upsert(map, job, None),
            None => Self::upsert(&mut cache.jobs.write().unwrap_or_else(|e| e.into_inner()), job, Some(cache)),
        }
    }

    fn delete(&self, cache: &ClusterCache, job: &BatchJobView) {
        let Some(jobset) = job.jobset_name() else { return };
        let k = key(job.metadata.namespace.as_deref().unwrap_or(""), jobset);
        let name = job.metadata.name.as_deref().unwrap_or("");
        let mut map = cache.jobs.write().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = map.get_mut(&k) {
            list.retain(|j| j.name() != name);
            if list.is_empty() {
                map.remove(&k);
            }
        }
        cache.publish(|| Some(IndexEvent::Changed(Box::new(Change::BatchJob(id_of(&job.metadata), None)))));
    }

    fn replace(&self, cache: &ClusterCache, map: Self::Map) {
        *cache.jobs.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    fn count(&self, cache: &ClusterCache) -> usize {
        cache.job_count()
    }
}

/// The planner's change for an object the watch applied: its facts, or its removal when the
/// planner does not keep it; none when the object does not reduce (the planner keeps what it had,
/// as a controller watching on its own skips such an object).
fn planner_change(
    change: Option<Change>,
    error: Option<FactsError>,
    removal: impl FnOnce() -> Change,
) -> Option<Change> {
    if let Some(e) = error {
        tracing::warn!(error = %e, "object skipped by the controller's planner");
        return None;
    }
    Some(change.unwrap_or_else(removal))
}

fn id_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> NsName {
    NsName::new(meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""))
}

/// Whether a watch error means "this resource does not exist here" (CRD not installed).
fn is_not_found(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 404,
        watcher::Error::WatchError(s) => s.code == 404,
        _ => false,
    }
}

/// How long a watch told 404 after the sync waits before it lists again (no hot loop when a
/// proxy keeps answering 404 to watches only).
const RELIST_DELAY: Duration = Duration::from_secs(1);

/// Feeds the watch streams `make_stream` creates into the cache until `shutdown`; a new stream
/// (a fresh list) replaces one told 404 after the sync.
#[allow(clippy::disallowed_methods, reason = "waits before a relist, as client-go's reflector does")]
async fn drive<K, S, F, St>(cache: Arc<ClusterCache>, make_stream: F, sink: S, shutdown: CancellationToken)
where
    S: Sink<K>,
    F: Fn() -> St + Send,
    St: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
{
    loop {
        match drive_stream(&cache, make_stream(), &sink, &shutdown).await {
            StreamEnd::Stopped => return,
            StreamEnd::Relist => {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    () = tokio::time::sleep(RELIST_DELAY) => {}
                }
            }
        }
    }
}

enum StreamEnd {
    Stopped,
    Relist,
}

/// One watch event into the cache: a list is staged and replaces the cache when it is done.
fn apply_event<K, S: Sink<K>>(cache: &ClusterCache, sink: &S, event: Event<K>, staging: &mut Option<S::Map>) {
    let health = S::health(cache);
    match event {
        // A list in progress says nothing yet about the cache's health.
        Event::Init => *staging = Some(S::Map::default()),
        Event::InitApply(obj) => sink.apply(cache, &obj, staging.as_mut()),
        Event::InitDone => {
            if let Some(map) = staging.take() {
                sink.replace(cache, map);
            }
            health.mark_ok();
            health.synced.store(true, Ordering::SeqCst);
            cache.publish(|| Some(IndexEvent::Resync(S::SOURCE)));
            cache.metrics.resource_absent.get_or_create(&CacheLabels { cache: S::NAME }).set(0);
            tracing::info!(cache = S::NAME, objects = sink.count(cache), "cache synced");
        }
        Event::Apply(obj) => {
            health.mark_ok();
            sink.apply(cache, &obj, None);
        }
        Event::Delete(obj) => {
            health.mark_ok();
            sink.delete(cache, &obj);
        }
    }
}

/// A 404 not believed on its word: the cache keeps its objects, counts as broken (it goes stale
/// after `--cache-stale-after`) and lists again.
fn distrust_404<K, S: Sink<K>>(cache: &ClusterCache, sink: &S, error: &watcher::Error, what: &str) -> StreamEnd {
    let health = S::health(cache);
    let labels = CacheLabels { cache: S::NAME };
    health.mark_broken(Instant::now());
    cache.metrics.watch_errors.get_or_create(&labels).inc();
    cache.metrics.resource_vanished.get_or_create(&labels).inc();
    tracing::warn!(cache = S::NAME, error = %error, "{what}");
    cache.set_gauges(S::NAME, sink.count(cache), health.synced());
    StreamEnd::Relist
}

/// Feeds one watch stream into the cache until `shutdown`, or until it must be replaced.
async fn drive_stream<K, S>(
    cache: &ClusterCache,
    stream: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    sink: &S,
    shutdown: &CancellationToken,
) -> StreamEnd
where
    S: Sink<K>,
{
    let mut stream = std::pin::pin!(stream);
    let mut staging: Option<S::Map> = None;
    let mut absent_logged = false;
    let labels = CacheLabels { cache: S::NAME };
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return StreamEnd::Stopped,
            next = stream.next() => next,
        };
        let Some(item) = next else { return StreamEnd::Stopped };
        let health = S::health(cache);
        match item {
            Ok(event) => {
                absent_logged = false;
                apply_event(cache, sink, event, &mut staging);
            }
            Err(e)
                if is_not_found(&e)
                    && matches!(e, watcher::Error::InitialListFailed(_))
                    && health.synced()
                    && cache.metrics.resource_absent.get_or_create(&labels).get() == 0 =>
            {
                // A list told 404 after the cache synced with the resource served: whatever
                // answered (a proxy, an aggregation layer in trouble) is not believed on its word.
                // The cache keeps its objects, counts as broken (the gate answers "state unknown"
                // once --cache-stale-after passes) and lists again; only a process that starts
                // with the resource absent treats it as empty.
                return distrust_404(
                    cache,
                    sink,
                    &e,
                    "the list answered 404 after the resource was served; keeping the cache (broken) and listing again",
                );
            }
            Err(e) if is_not_found(&e) && matches!(e, watcher::Error::InitialListFailed(_)) => {
                // The list says the resource is not served: the CRD is not installed, so no
                // objects of this kind exist. The watcher keeps retrying with backoff, so a CRD
                // installed later is picked up.
                // (A watch told 404 before this list was counted in `cache_resource_vanished`.)
                if health.synced() && cache.metrics.resource_absent.get_or_create(&labels).get() == 0 {
                    tracing::warn!(
                        cache = S::NAME,
                        "the resource is no longer served (CRD deleted?): the cache is now empty"
                    );
                }
                staging = None;
                sink.clear(cache);
                health.mark_ok();
                health.synced.store(true, Ordering::SeqCst);
                cache.publish(|| Some(IndexEvent::Resync(S::SOURCE)));
                cache.metrics.resource_absent.get_or_create(&labels).set(1);
                if !absent_logged {
                    tracing::info!(
                        cache = S::NAME,
                        "resource not served by the API server (CRD absent): treated as empty"
                    );
                    absent_logged = true;
                }
            }
            Err(e) if is_not_found(&e) => {
                // A watch told 404: the resource may have vanished, or whatever answered may be
                // wrong. Keep the cache (it goes stale after `stale_after`) and list again.
                return distrust_404(cache, sink, &e, "watch answered 404 after the sync; listing again");
            }
            Err(e) => {
                health.mark_broken(Instant::now());
                cache.metrics.watch_errors.get_or_create(&labels).inc();
                tracing::warn!(cache = S::NAME, error = %e, "watch failed; retrying with backoff");
            }
        }
        cache.set_gauges(S::NAME, sink.count(cache), health.synced());
    }
}
