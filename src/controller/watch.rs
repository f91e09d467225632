//! The watches: kube-rs watchers for the six `kubeflow.org/v1` kinds, TrainJobs, JobSets, the
//! `batch/v1` Jobs of JobSets, training pods (two label selectors), nodes and Kueue Workloads. Each object is decoded into its slim view,
//! reduced to compact facts right here, and sent to the controller loop as a snapshot [`Change`];
//! the full objects are dropped at once. A kind whose CRD is absent (404 on the initial list) is
//! skipped with one log line and retried every few minutes. Where the process has the cluster
//! index (`crate::cluster`, the webhook's gate caches), JobSets and their Jobs are read from it,
//! compacted once for both. With a namespace allow-list
//! (`--namespaces`) each source but nodes runs one watch per listed namespace
//! ([`super::namespaces`]), and a relist in one namespace replaces only that namespace's objects.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::namespaces::Namespaces;
use crate::cluster::{ClusterCache, IndexEvent, IndexSource};
use trainguard_core::model::jobset::{BatchJobView, JOBSET_NAME_LABEL, JobSetView};
use trainguard_core::model::kubeflow_v1::{JOB_NAME_LABEL, TrainingJobView, TrainingKind};
use trainguard_core::model::pod::{NodeView, PodView};
use trainguard_core::model::trainjob_state::TrainJobStateView;
use trainguard_core::model::workload::{WORKLOAD_VERSIONS, WorkloadView, workload_api_resource};
use trainguard_core::planner::facts::{
    BatchJobFacts, FactsError, JobFacts, JobKey, JobSetFacts, NodeFacts, NsName, PodFacts, TrainJobFacts, WorkloadFacts,
};
use trainguard_core::planner::snapshot::{Change, Source};

/// How long to wait before looking again for a CRD that is not installed.
const ABSENT_RETRY: Duration = Duration::from_secs(300);

/// Objects per page of an initial list. Each page is decoded, reduced to facts and dropped before
/// the next is requested, so the memory a list needs is bounded by this, not by the cluster size.
pub(crate) const PAGE_SIZE: u32 = 100;

/// The watcher configuration of every source: paged initial lists of [`PAGE_SIZE`] objects, and
/// watch calls that end within a minute ([`crate::cluster::watch_config`]).
fn config() -> watcher::Config {
    crate::cluster::watch_config().page_size(PAGE_SIZE)
}

/// What the watches tell the controller loop.
#[derive(Debug)]
pub(crate) enum WatchMsg {
    /// Boxed: facts are a few hundred bytes, and the channel holds thousands of messages.
    Change(Box<Change>),
    /// The source finished its first list (or its CRD is absent): it counts for the first sync.
    Ready(Source),
}

/// Every source the controller watches.
pub fn sources() -> Vec<Source> {
    let mut s: Vec<Source> = TrainingKind::ALL.into_iter().map(Source::Jobs).collect();
    s.extend([
        Source::TrainJobs,
        Source::JobSets,
        Source::BatchJobs,
        Source::V1Pods,
        Source::JobSetPods,
        Source::Nodes,
        Source::Workloads,
    ]);
    s
}

/// Starts one task per source. They stop when `shutdown` is cancelled or the receiver is gone.
/// With a namespace allow-list, each source but nodes watches every listed namespace on its own.
/// With the process's cluster index (`serve` with the webhook on), JobSets and their Jobs are
/// read from it rather than watched a second time.
pub(crate) fn spawn_all(
    client: Client,
    namespaces: &Namespaces,
    index: Option<&Arc<ClusterCache>>,
    tx: mpsc::Sender<WatchMsg>,
    shutdown: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    sources()
        .into_iter()
        .map(|source| {
            let (client, tx, shutdown) = (client.clone(), tx.clone(), shutdown.clone());
            let scope = match namespaces.listed() {
                // Nodes are cluster-scoped: node failure needs them wherever the listed pods run.
                Some(listed) if source != Source::Nodes => Scope::Namespaces(listed.to_vec()),
                _ => Scope::Cluster,
            };
            let indexed = match source {
                Source::JobSets => Some(IndexSource::JobSets),
                Source::BatchJobs => Some(IndexSource::Jobs),
                _ => None,
            };
            let follow = index.cloned().zip(indexed);
            tokio::spawn(async move {
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = async {
                        match follow {
                            Some((index, from)) => follow_index(&index, from, source, scope, tx).await,
                            None => run_source(client, source, scope, tx).await,
                        }
                    } => {}
                }
            })
        })
        .collect()
}

/// Feeds `source` from the cluster index: everything it holds once it has synced (then `Ready`),
/// then its changes; all of it again after a relist, or when this reader fell behind.
async fn follow_index(
    index: &ClusterCache,
    from: IndexSource,
    source: Source,
    scope: Scope,
    tx: mpsc::Sender<WatchMsg>,
) {
    let wanted = |id: &NsName| match &scope {
        Scope::Cluster => true,
        Scope::Namespaces(listed) => listed.iter().any(|ns| **ns == *id.namespace),
    };
    let wanted_change = |change: &Change| match change {
        Change::JobSet(id, _) | Change::BatchJob(id, _) => wanted(id),
        _ => false,
    };
    let mut events = index.subscribe();
    let mut read_all = true;
    let mut ready = false;
    loop {
        if read_all && let Some((changes, mut ids)) = index.planner_contents(from) {
            read_all = false;
            ids.retain(|id| wanted(id));
            let changes = changes.into_iter().filter(|c| wanted_change(c)).map(|c| WatchMsg::Change(Box::new(c)));
            let relisted = WatchMsg::Change(Box::new(Change::Relisted(source, ids)));
            let ready_now = (!ready).then_some(WatchMsg::Ready(source));
            ready = true;
            for msg in changes.chain([relisted]).chain(ready_now) {
                if tx.send(msg).await.is_err() {
                    return;
                }
            }
        }
        match events.recv().await {
            Ok(IndexEvent::Changed(change)) => {
                let ours = matches!(
                    (&*change, from),
                    (Change::JobSet(..), IndexSource::JobSets) | (Change::BatchJob(..), IndexSource::Jobs)
                );
                if ours && wanted_change(change.as_ref()) && tx.send(WatchMsg::Change(change)).await.is_err() {
                    return;
                }
            }
            Ok(IndexEvent::Resync(s)) => read_all |= s == from,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                warn!(?source, missed, "fell behind the cluster index: reading it again");
                read_all = true;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Where one source watches: one cluster-wide watch, or one watch per listed namespace.
#[derive(Debug, Clone)]
enum Scope {
    Cluster,
    Namespaces(Vec<String>),
}

/// An `Api` for `namespace`, or for every namespace.
fn api<K>(client: &Client, namespace: Option<&str>, dyntype: &K::DynamicType) -> Api<K>
where
    K: Resource<Scope = kube::core::DynamicResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, dyntype),
        None => Api::all_with(client.clone(), dyntype),
    }
}

/// The pods `Api` for `namespace`, or for every namespace.
fn pods_api(client: &Client, namespace: Option<&str>) -> Api<PodView> {
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

async fn run_source(client: Client, source: Source, scope: Scope, tx: mpsc::Sender<WatchMsg>) {
    let c = &client;
    match source {
        Source::Jobs(kind) => {
            let resource = kind.api_resource();
            let apis = |ns: Option<&str>| vec![api::<TrainingJobView>(c, ns, &resource)];
            watch_scoped(apis, scope, config(), source, tx, move |job| job_change(kind, job)).await
        }
        Source::TrainJobs => {
            let apis = |ns: Option<&str>| vec![api::<TrainJobStateView>(c, ns, &())];
            watch_scoped(apis, scope, config(), source, tx, trainjob_change).await
        }
        Source::JobSets => {
            let apis = |ns: Option<&str>| vec![api::<JobSetView>(c, ns, &())];
            watch_scoped(apis, scope, config(), source, tx, jobset_change).await
        }
        Source::BatchJobs => {
            // Only the Jobs JobSets create carry the label; the rest of the cluster's Jobs stay out.
            let apis = |ns: Option<&str>| vec![api::<BatchJobView>(c, ns, &())];
            let config = config().labels(JOBSET_NAME_LABEL);
            watch_scoped(apis, scope, config, source, tx, batch_job_change).await
        }
        Source::V1Pods => {
            let apis = |ns: Option<&str>| vec![pods_api(c, ns)];
            watch_scoped(apis, scope, config().labels(JOB_NAME_LABEL), source, tx, pod_change).await
        }
        Source::JobSetPods => {
            let apis = |ns: Option<&str>| vec![pods_api(c, ns)];
            watch_scoped(apis, scope, config().labels(JOBSET_NAME_LABEL), source, tx, pod_change).await
        }
        Source::Nodes => {
            let api: Api<NodeView> = Api::all(client);
            let ready = ReadyGate::new(1);
            watch_loop(vec![api], config(), source, &tx, &node_change, Relist::Whole, ready).await
        }
        Source::Workloads => {
            // v1beta2 since Kueue v0.15, v1beta1 before: the first version served wins.
            let apis = |ns: Option<&str>| {
                WORKLOAD_VERSIONS.iter().map(|v| api::<WorkloadView>(c, ns, &workload_api_resource(v))).collect()
            };
            watch_scoped(apis, scope, config(), source, tx, workload_change).await
        }
    }
}

/// Runs the watches of one source in `scope`: one cluster-wide, or one per namespace, all in this
/// task. The source is ready once every one of them has listed (or found its CRD absent).
async fn watch_scoped<K, A, F>(
    apis: A,
    scope: Scope,
    config: watcher::Config,
    source: Source,
    tx: mpsc::Sender<WatchMsg>,
    convert: F,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    A: Fn(Option<&str>) -> Vec<Api<K>>,
    F: Fn(&K) -> Converted,
{
    match scope {
        Scope::Cluster => watch_loop(apis(None), config, source, &tx, &convert, Relist::Whole, ReadyGate::new(1)).await,
        Scope::Namespaces(namespaces) => {
            let remaining = Arc::new(AtomicUsize::new(namespaces.len()));
            let loops = namespaces.iter().map(|ns| {
                let ready = ReadyGate { announced: false, remaining: remaining.clone() };
                watch_loop(apis(Some(ns)), config.clone(), source, &tx, &convert, Relist::Namespace, ready)
            });
            futures::future::join_all(loops).await;
        }
    }
}
/// (key, change for the object as it is now). A change with `None` facts removes the key.
type Converted = Result<(NsName, Change), FactsError>;

fn job_change(kind: TrainingKind, job: &TrainingJobView) -> Converted {
    let facts = JobFacts::from_view(kind, job)?;
    Ok((facts.key.id.clone(), Change::Job(facts.key.clone(), Some(facts))))
}

fn trainjob_change(tj: &TrainJobStateView) -> Converted {
    let facts = TrainJobFacts::from_view(tj)?;
    Ok((facts.id.clone(), Change::TrainJob(facts.id.clone(), Some(facts))))
}

fn jobset_change(js: &JobSetView) -> Converted {
    let id = id_of(&js.metadata);
    // A JobSet no TrainJob controls is not kept (and dropped if it was).
    Ok((id.clone(), Change::JobSet(id, JobSetFacts::from_view(js)?)))
}

fn batch_job_change(job: &BatchJobView) -> Converted {
    let id = id_of(&job.metadata);
    Ok((id.clone(), Change::BatchJob(id, BatchJobFacts::from_view(job)?)))
}

fn pod_change(pod: &PodView) -> Converted {
    // The key shares its strings with the facts (a relist holds every key until it is done).
    let facts = PodFacts::from_view(pod)?;
    let id = facts.as_ref().map_or_else(|| id_of(&pod.metadata), |f| f.id.clone());
    Ok((id.clone(), Change::Pod(id, facts)))
}

fn node_change(node: &NodeView) -> Converted {
    let facts = NodeFacts::from_view(node)?;
    Ok((NsName::new("", &facts.name), Change::Node(facts.name.clone(), Some(facts))))
}

fn workload_change(wl: &WorkloadView) -> Converted {
    let facts = WorkloadFacts::from_view(wl)?;
    Ok((facts.id.clone(), Change::Workload(facts.id.clone(), Some(facts))))
}

fn id_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> NsName {
    NsName::new(meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""))
}

/// The change that removes `id` from `source`.
fn removal(source: Source, id: NsName) -> Change {
    match source {
        Source::Jobs(kind) => Change::Job(JobKey { kind, id }, None),
        Source::TrainJobs => Change::TrainJob(id, None),
        Source::JobSets => Change::JobSet(id, None),
        Source::BatchJobs => Change::BatchJob(id, None),
        Source::V1Pods | Source::JobSetPods => Change::Pod(id, None),
        Source::Nodes => Change::Node(id.name, None),
        Source::Workloads => Change::Workload(id, None),
    }
}

fn not_found(err: &watcher::Error) -> bool {
    matches!(err, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404)
}

/// What a relist replaces: the whole source (a cluster-wide watch), or only what this
/// namespace's watch had listed (one of several per-namespace watches of the source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relist {
    Whole,
    Namespace,
}

/// Tells the loop a source is ready once all of its watches have listed once.
struct ReadyGate {
    /// This watch has counted itself.
    announced: bool,
    /// Watches of the source that have not listed yet.
    remaining: Arc<AtomicUsize>,
}

impl ReadyGate {
    fn new(watches: usize) -> Self {
        ReadyGate { announced: false, remaining: Arc::new(AtomicUsize::new(watches)) }
    }

    /// Counts this watch as listed (once); true when it was the last of its source.
    fn listed(&mut self) -> bool {
        if self.announced {
            return false;
        }
        self.announced = true;
        self.remaining.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// Watches the first API of `apis` the server serves; relists replace the objects the watch
/// covers (the whole source, or what it listed in its namespace).
#[allow(clippy::disallowed_methods, reason = "retries a watch whose CRD is absent after a delay")]
async fn watch_loop<K, F>(
    apis: Vec<Api<K>>,
    config: watcher::Config,
    source: Source,
    tx: &mpsc::Sender<WatchMsg>,
    convert: &F,
    relist: Relist,
    mut ready: ReadyGate,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: Fn(&K) -> Converted,
{
    let mut logged_absent = false;
    // The ids this watch holds, for a per-namespace relist (empty for a cluster-wide watch).
    let mut held: HashSet<NsName> = HashSet::new();
    loop {
        let mut absent = 0;
        for api in &apis {
            match watch_api(api.clone(), config.clone(), source, tx, convert, relist, &mut held, &mut ready).await {
                WatchEnd::Absent => absent += 1,
                WatchEnd::ReceiverGone => return,
            }
        }
        if absent == apis.len() {
            if !logged_absent {
                info!(?source, "not installed in this cluster (404): skipped, looking again every 5 minutes");
                logged_absent = true;
            }
            if ready.listed() && tx.send(WatchMsg::Ready(source)).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(ABSENT_RETRY).await;
    }
}

enum WatchEnd {
    Absent,
    ReceiverGone,
}

#[allow(clippy::too_many_arguments)]
async fn watch_api<K, F>(
    api: Api<K>,
    config: watcher::Config,
    source: Source,
    tx: &mpsc::Sender<WatchMsg>,
    convert: &F,
    relist_scope: Relist,
    held: &mut HashSet<NsName>,
    ready: &mut ReadyGate,
) -> WatchEnd
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: Fn(&K) -> Converted,
{
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut relist: Option<HashSet<NsName>> = None;
    let mut listed_once = false;
    let per_namespace = relist_scope == Relist::Namespace;
    while let Some(event) = stream.next().await {
        let msgs: Vec<WatchMsg> = match event {
            Err(err) if !listed_once && not_found(&err) => return WatchEnd::Absent,
            Err(err) => {
                warn!(?source, error = %err, "watch error; retrying with backoff");
                continue;
            }
            Ok(Event::Init) => {
                relist = Some(HashSet::new());
                continue;
            }
            Ok(Event::InitApply(obj)) | Ok(Event::Apply(obj)) => match convert(&obj) {
                Ok((id, change)) => {
                    if per_namespace && relist.is_none() {
                        held.insert(id.clone());
                    }
                    if let Some(seen) = relist.as_mut() {
                        seen.insert(id);
                    }
                    vec![WatchMsg::Change(Box::new(change))]
                }
                Err(err) => {
                    warn!(?source, error = %err, "object skipped");
                    continue;
                }
            },
            Ok(Event::Delete(obj)) => {
                let id = id_of(obj.meta());
                if per_namespace {
                    held.remove(&id);
                }
                vec![WatchMsg::Change(Box::new(removal(source, id)))]
            }
            Ok(Event::InitDone) => {
                listed_once = true;
                let seen = relist.take().unwrap_or_default();
                let mut msgs = if per_namespace {
                    // The other namespaces' watches hold the rest of the source: remove only what
                    // this namespace held and no longer lists.
                    let gone: Vec<WatchMsg> = held
                        .iter()
                        .filter(|id| !seen.contains(*id))
                        .map(|id| WatchMsg::Change(Box::new(removal(source, id.clone()))))
                        .collect();
                    *held = seen;
                    gone
                } else {
                    vec![WatchMsg::Change(Box::new(Change::Relisted(source, seen)))]
                };
                if ready.listed() {
                    msgs.push(WatchMsg::Ready(source));
                }
                msgs
            }
        };
        for msg in msgs {
            if tx.send(msg).await.is_err() {
                return WatchEnd::ReceiverGone;
            }
        }
    }
    WatchEnd::ReceiverGone
}
