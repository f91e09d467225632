//! trainguard's own image on a real node: a kubelet with containerd and runc beside the kwok nodes
//! (`scripts/e2e/plane.sh node start`; `make e2e` starts it with `TRAINGUARD_E2E_NODE=1`), the image
//! `make image` assembles imported into that containerd. A pod of it, placed there with the node's
//! toleration, runs as the image's user (uid 65532) on a read-only root filesystem, its probes
//! pass, and it answers on its pod address. Opt-in while the node is young: the test is ignored
//! unless `TRAINGUARD_E2E_NODE=1` (run.sh then runs the ignored tests too), and a plane without the
//! node fails it.

use std::process::Command;

use serde_json::Value;

use crate::cluster::{eventually, plane};

const NS: &str = "e2e-real-node";

/// The container's main process on the host, through the node's containerd.
pub(crate) fn host_pid(container_id: &str) -> u32 {
    let ctr = format!("{}/ctr", plane().var("E2E_BIN"));
    let out = Command::new(&ctr)
        .args(["--address", plane().var("NODE_CONTAINERD_ADDRESS"), "-n", "k8s.io", "tasks", "ls"])
        .output()
        .expect("run ctr");
    assert!(out.status.success(), "ctr tasks ls: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.starts_with(container_id)).unwrap_or_else(|| panic!("{container_id} in {text}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn curl(args: &[&str]) -> Option<String> {
    let out = Command::new("curl").args(["-s", "--max-time", "5"]).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
#[ignore = "the real node is opt-in: TRAINGUARD_E2E_NODE=1 make e2e starts it and runs this test"]
fn trainguard_image_runs_on_the_real_node_as_nonroot_with_a_read_only_root() {
    let (Some(node), Some(image)) = (plane().get("NODE_NAME"), plane().get("TRAINGUARD_IMAGE_REF")) else {
        panic!("the plane has no real node with the trainguard image (plane.sh node start)");
    };
    let ns = plane().namespace(NS, &[]);
    // As deploy/ runs it (non-root, no privilege escalation, all capabilities dropped, RuntimeDefault
    // seccomp, read-only root), with --dev's self-generated certificates in a writable /tmp: the
    // image alone, without the cluster (installed.rs runs the shipped Deployments).
    plane().kubectl().args(["-n", &ns.name]).apply(&format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: trainguard
spec:
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  tolerations: [{{key: e2e.trainguard.io/real-node, operator: Exists, effect: NoSchedule}}]
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 5
  securityContext:
    runAsNonRoot: true
    seccompProfile: {{type: RuntimeDefault}}
  containers:
  - name: trainguard
    image: {image}
    imagePullPolicy: Never
    args: [serve, --dev, --controller=false, --bind=0.0.0.0:9443, --admin-bind=0.0.0.0:8080, --drain-delay=0s]
    env: [{{name: TRAINGUARD_LOG_FORMAT, value: json}}]
    ports: [{{name: webhook, containerPort: 9443}}, {{name: admin, containerPort: 8080}}]
    readinessProbe: {{httpGet: {{path: /readyz, port: admin}}, periodSeconds: 2, failureThreshold: 2}}
    livenessProbe: {{httpGet: {{path: /healthz, port: admin}}, periodSeconds: 5}}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {{drop: [ALL]}}
    volumeMounts: [{{name: tmp, mountPath: /tmp}}]
  volumes: [{{name: tmp, emptyDir: {{}}}}]
"
    ));
    let pod: Value = eventually("the trainguard pod Ready on the real node", || {
        let pod = plane().kubectl().args(["-n", &ns.name, "get", "pod", "trainguard"]).get_json()?;
        let ready =
            pod["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(pod)
    });
    assert_eq!(pod["spec"]["nodeName"], node);
    let status = &pod["status"]["containerStatuses"][0];
    assert_eq!(status["restartCount"], 0, "{status}");
    // The image's user, from the image (the pod names none).
    let id = status["containerID"].as_str().unwrap().trim_start_matches("containerd://");
    let pid = host_pid(id);
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uids: Vec<&str> = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap().split_whitespace().collect();
    assert_eq!(&uids[1..], ["65532"; 4], "{proc_status}");
    let gids: Vec<&str> = proc_status.lines().find(|l| l.starts_with("Gid:")).unwrap().split_whitespace().collect();
    assert_eq!(&gids[1..], ["65532"; 4], "{proc_status}");
    // Its root filesystem, seen from inside its mount namespace, is mounted read-only.
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mounts")).unwrap();
    let root = mounts.lines().find(|l| l.split_whitespace().nth(1) == Some("/")).unwrap();
    let options = root.split_whitespace().nth(3).unwrap();
    assert!(options.split(',').any(|o| o == "ro"), "root mounted {options}");
    // Its pod address is on the node's bridge range, and it answers there: the admin port the
    // probes use, and the webhook's TLS port with the certificate --dev generated.
    let ip = pod["status"]["podIP"].as_str().unwrap();
    let range = plane().var("NODE_POD_CIDR");
    assert!(ip.starts_with(range.rsplit_once('.').unwrap().0), "{ip} outside {range}");
    assert_eq!(curl(&["-f", &format!("http://{ip}:8080/healthz")]).as_deref().map(str::trim), Some("ok"));
    let metrics = curl(&["-f", &format!("http://{ip}:8080/metrics")]).expect("metrics");
    assert!(metrics.contains("# TYPE"), "{metrics}");
    let tls = Command::new("curl")
        .args([
            "-sk",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("https://{ip}:9443/validate"),
        ])
        .output()
        .unwrap();
    let code = String::from_utf8_lossy(&tls.stdout);
    assert!(code.starts_with('4') || code.starts_with('2'), "the webhook port answered {code}");
    // The API server reaches the kubelet: kubectl logs shows the server's JSON log.
    let logs = plane().kubectl().args(["-n", &ns.name, "logs", "trainguard"]).ok();
    assert!(logs.lines().any(|l| l.starts_with('{')), "{logs}");
    plane().kubectl().args(["-n", &ns.name, "delete", "pod", "trainguard", "--wait=true", "--timeout=60s"]).ok();
}
