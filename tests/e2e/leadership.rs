//! Two controller processes against the real Lease, each with its own identity and User-Agent:
//! SIGKILL the leader, the other takes over within the lease duration + its renewal margin, and
//! the audit log shows no pod or TrainJob written by both.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::cluster::{act_rbac, eventually, plane, trainjob};

const SA: &str = "system:serviceaccount:trainguard-system:trainguard-controller";
/// The controller's Lease: 15s validity, renewed 5s before expiry.
const TAKEOVER_BOUND: Duration = Duration::from_secs(15 + 5 + 5);

/// Stops the replicas and brings the shipped controller back when the test ends.
struct Replicas;

impl Drop for Replicas {
    fn drop(&mut self) {
        for name in ["tg-ctrl-a", "tg-ctrl-b"] {
            plane().script(&["replica", "stop", name]);
        }
        act_rbac(false);
        plane().script(&["start", "controller"]);
    }
}

fn holder() -> Option<String> {
    let lease =
        plane().kubectl().args(["-n", "trainguard-system", "get", "lease", "trainguard-controller"]).get_json()?;
    lease["spec"]["holderIdentity"].as_str().map(String::from)
}

fn ttl_job(name: &str) -> String {
    trainjob(name, "e2e-torch-quick", false, "").replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    trainguard.io/ttl-seconds-after-finished: \"1\"\n",
        1,
    )
}

fn gone(ns: &str, name: &str) -> bool {
    plane().kubectl().args(["-n", ns, "get", "trainjob", name]).get_json().is_none()
}

#[test]
#[allow(clippy::disallowed_methods, reason = "lets the audit log flush to disk before it is read")]
fn a_sigkilled_leader_is_replaced_within_the_lease_and_no_object_is_written_by_both() {
    let ns = plane().namespace("e2e-leadership", &[]);
    let since = crate::cluster::audit_now();
    let port: u16 = plane().var("TRAINGUARD_CONTROLLER_ADMIN_PORT").parse().expect("port");
    plane().script(&["stop", "controller"]);
    let _replicas = Replicas;
    act_rbac(true);
    let args = ["--controller-mode=act", "--ttl-grace=0s"];
    let a_port = (port + 4).to_string();
    let b_port = (port + 5).to_string();
    let start = |name: &str, p: &str| {
        let mut v = vec!["replica", "start", name, p];
        v.extend_from_slice(&args);
        plane().script(&v);
    };
    start("tg-ctrl-a", &a_port);
    eventually("tg-ctrl-a holds the Lease", || (holder().as_deref() == Some("tg-ctrl-a")).then_some(()));
    start("tg-ctrl-b", &b_port);

    // The leader acts: a finished TrainJob is TTL-deleted by tg-ctrl-a.
    let k = || plane().kubectl().args(["-n", &ns.name]);
    k().apply(&ttl_job("before"));
    eventually("'before' TTL-deleted by the leader", || gone(&ns.name, "before").then_some(()));
    assert_eq!(holder().as_deref(), Some("tg-ctrl-a"));

    // SIGKILL: no release of the Lease; tg-ctrl-b takes over once it expires.
    k().apply(&ttl_job("after"));
    let t0 = Instant::now();
    plane().script(&["replica", "kill", "tg-ctrl-a"]);
    eventually("tg-ctrl-b holds the Lease", || (holder().as_deref() == Some("tg-ctrl-b")).then_some(()));
    let takeover = t0.elapsed();
    eventually("'after' TTL-deleted by the new leader", || gone(&ns.name, "after").then_some(()));
    eprintln!("leadership: tg-ctrl-b took over {:.1}s after SIGKILL of tg-ctrl-a", takeover.as_secs_f64());
    assert!(takeover <= TAKEOVER_BOUND, "takeover took {takeover:?}, more than {TAKEOVER_BOUND:?}");

    // The audit log: every pod or TrainJob the controller's ServiceAccount wrote was written by
    // one replica only (told apart by their User-Agent), and each replica wrote one of the two.
    std::thread::sleep(Duration::from_secs(2));
    let mut writers: HashMap<String, HashSet<String>> = HashMap::new();
    for e in crate::cluster::audit_since(&since) {
        let r = &e["objectRef"];
        if e["user"]["username"] != SA
            || e["stage"] != "ResponseComplete"
            || !(r["resource"] == "pods" || r["resource"] == "trainjobs")
            || r["namespace"] != ns.name.as_str()
        {
            continue;
        }
        let key = format!("{}/{}", r["resource"].as_str().unwrap_or(""), r["name"].as_str().unwrap_or(""));
        writers.entry(key).or_default().insert(e["userAgent"].as_str().unwrap_or("").to_string());
    }
    let both: Vec<_> = writers.iter().filter(|(_, agents)| agents.len() > 1).collect();
    assert!(both.is_empty(), "written by both replicas: {both:?}");
    let agent_of = |name: &str| writers.get(&format!("trainjobs/{name}")).cloned().unwrap_or_default();
    assert!(
        agent_of("before").iter().all(|a| a.contains("(tg-ctrl-a)")) && !agent_of("before").is_empty(),
        "{writers:?}"
    );
    assert!(
        agent_of("after").iter().all(|a| a.contains("(tg-ctrl-b)")) && !agent_of("after").is_empty(),
        "{writers:?}"
    );
}
