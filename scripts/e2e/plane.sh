#!/usr/bin/env bash
# The local control plane for `make e2e`: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, JobSet's and Trainer's controllers, built from their Go modules
# (scripts/e2e/build.sh), all on 127.0.0.1, plus trainguard registered from deploy/ with only
# clientConfig changed to a loopback URL (as controller-runtime's envtest does).
#
#   scripts/e2e/plane.sh up                 start everything; prints the run directory
#   scripts/e2e/plane.sh down               stop everything (logs stay in the run directory)
#   scripts/e2e/plane.sh stop webhook       stop trainguard's webhook (failurePolicy tests) or controller
#   scripts/e2e/plane.sh start controller --controller-mode=act   start one again, extra args appended
#   scripts/e2e/plane.sh restore            trainguard's objects, tokens, processes and registration
#                                           as `up` made them (after a test installed or uninstalled it)
#   scripts/e2e/plane.sh kwok start NAME SELECTOR [no-pod-delete]   a kwok of its own for the nodes
#                                                   SELECTOR matches (never finishing a pod's deletion)
#   scripts/e2e/plane.sh kwok stop NAME             stop it: those nodes' kubelets are gone
#   scripts/e2e/plane.sh replica start NAME PORT [ARGS]   one more controller process (admin on PORT)
#   scripts/e2e/plane.sh replica stop|kill NAME     SIGTERM it, or SIGKILL it at once
#   scripts/e2e/plane.sh kueue start|stop     Kueue (its CRDs, webhooks and controller) for the
#                                             tests that need it; stop takes its webhooks away
#   scripts/e2e/plane.sh training-operator start [VERSION]|stop   Training Operator v1 (every kind its
#                                             release has: CRDs, webhooks, schemes), the same way;
#                                             VERSION defaults to TRAINING_OPERATOR_VERSION (v1.8.0: the
#                                             TFJob story's release)
#   scripts/e2e/plane.sh node start|stop      a real node beside the kwok nodes: containerd, runc and a
#                                             kubelet (root, cgroup v1 or v2, scripts/e2e/build.sh node),
#                                             tainted, its pods on a bridge of its own, NetworkPolicy
#                                             enforced (kube-network-policies); the trainguard image
#                                             (make image) and a busybox client image in its containerd
#
# The run directory ($TRAINGUARD_E2E_RUN, default /tmp/trainguard-e2e) holds env (sourced by the
# tests: KUBECONFIG, ports, paths), certs/, logs/ and pids/. Every start and stop has a bounded
# wait; on a failed start the process's log tail is printed. TRAINGUARD_E2E_KUBERNETES chooses the
# Kubernetes minor (e2e/kubernetes/<minor>.env, default v1.37; scripts/e2e/versions.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
run="${TRAINGUARD_E2E_RUN:-/tmp/trainguard-e2e}"
# The port base: given, else the running plane's (so `stop`/`start` from a test reach the plane
# `up` started with another base), else 24000.
base="${TRAINGUARD_E2E_PORT_BASE:-$(sed -n 's/^PORT_BASE=//p' "$run/env" 2>/dev/null || true)}"
base="${base:-24000}"
# The Kubernetes minor: TRAINGUARD_E2E_KUBERNETES, else (for every command but `up`) the running
# plane's, else v1.37.
if [[ ${1:-} == up ]]; then versions_run=; else versions_run="$run"; fi
# shellcheck source=versions.sh
run="$versions_run" source "$root/scripts/e2e/versions.sh"

log() { echo "e2e/plane: $*" >&2; }
die() { log "$*"; exit 1; }

# Ports: one block above $base, far from every component's default (9443, 8080-8082, 8443, 10443)
# and below Linux's ephemeral range (32768-60999), where an outgoing connection's local port could
# take one of them first.
P_ETCD=$((base + 1)) P_ETCD_PEER=$((base + 2)) P_APISERVER=$((base + 443))
P_KCM=$((base + 257)) P_SCHED=$((base + 259)) P_KWOK=$((base + 10))
P_JOBSET_WH=$((base + 20)) P_JOBSET_METRICS=$((base + 21)) P_JOBSET_PROBE=$((base + 22))
P_TRAINER_WH=$((base + 30)) P_TRAINER_METRICS=$((base + 31)) P_TRAINER_PROBE=$((base + 32)) P_TRAINER_STATUS=$((base + 33))
P_TRAINGUARD=$((base + 40)) P_TRAINGUARD_ADMIN=$((base + 41)) P_TRAINGUARD_CTRL_ADMIN=$((base + 42))
P_KUEUE_WH=$((base + 50)) P_KUEUE_METRICS=$((base + 51)) P_KUEUE_PROBE=$((base + 52))
P_TO_WH=$((base + 60)) P_TO_METRICS=$((base + 61)) P_TO_PROBE=$((base + 62))
P_KUBELET=$((base + 70)) P_KUBELET_HEALTHZ=$((base + 71))
P_PROXY_HEALTHZ=$((base + 72)) P_PROXY_METRICS=$((base + 73)) P_NODE_KCM=$((base + 74)) P_NETPOL_METRICS=$((base + 75))
# Services: the API server's --service-cluster-ip-range, and the `kubernetes` Service's address in it.
SERVICE_CIDR=10.96.0.0/16 SERVICE_APISERVER_IP=10.96.0.1

# Every kubectl request has a deadline: one hung call must fail the run, not hang CI.
kctl() { "$BIN/kubectl" --request-timeout=60s --kubeconfig "$run/admin.kubeconfig" --cache-dir "$run/kubectl-cache" "$@"; }

wait_for() { # description seconds command...: polls until the command succeeds
  local what="$1" secs="$2" deadline=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "timed out after ${secs}s waiting for $what"; return 1; }
    sleep 0.5
  done
}

# A process's identity: its start time (field 22 of /proc/PID/stat, unchanged by exec) and its
# process group (field 5). A PID alone may name another process once the one started has exited.
identity() { # pid: prints "starttime pgid", or nothing when there is no such process
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  # The command name (field 2) may hold spaces: count the fields after its closing parenthesis.
  stat="${stat##*) }"
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20} ${3}"
}

start() { # name command...: starts a process in the background with its own TMPDIR and log
  local name="$1"; shift
  mkdir -p "$run/tmp/$name" "$run/logs" "$run/pids"
  # setsid in a background job (not a group leader) execs in place: the PID leads the new session
  # and process group, so stop() can signal everything it spawned.
  TMPDIR="$run/tmp/$name" setsid "$@" >"$run/logs/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid $(identity "$pid")" >"$run/pids/$name"
}

ours() { # pidfile: prints the PID while it is still the process start() started (same start time)
  local pid started rest now
  read -r pid started rest <"$1" 2>/dev/null || return 0
  [[ -n "$pid" && -n "$started" ]] || return 0
  now="$(identity "$pid")"
  [[ -n "$now" && "${now%% *}" == "$started" ]] && echo "$pid"
  return 0
}

signal() { # SIGNAL pidfile: signals the process group start() made, only while it is still ours
  local pid
  pid="$(ours "$2")"
  [[ -n "$pid" ]] || return 1
  # Its own group once setsid has run; before that (a moment after start) the process alone.
  if [[ "$(identity "$pid")" == *" $pid" ]]; then kill "-$1" -- "-$pid" 2>/dev/null; else kill "-$1" "$pid" 2>/dev/null; fi
  return 0
}

started() { # name description seconds command...: waits for readiness, or shows the log and fails
  local name="$1" what="$2" secs="$3"; shift 3
  if ! wait_for "$what" "$secs" "$@"; then
    log "--- last lines of $run/logs/$name.log ---"; tail -n 40 "$run/logs/$name.log" >&2 || true
    return 1
  fi
  if [[ -z "$(ours "$run/pids/$name")" ]]; then
    log "$name exited"; tail -n 40 "$run/logs/$name.log" >&2; return 1
  fi
}

stop() { # name: SIGTERM to its process group, then SIGKILL after 10 s. A PID that is no longer
  # the process start() started (it exited and the PID was reused) is left alone.
  local pidfile="$run/pids/$1"
  [[ -f "$pidfile" ]] || return 0
  if signal TERM "$pidfile"; then
    for _ in $(seq 1 40); do [[ -n "$(ours "$pidfile")" ]] || break; sleep 0.25; done
    signal KILL "$pidfile" || true
  fi
  rm -f "$pidfile"
}

# kwok runs no stages unless given some: its own node (initialize, heartbeat with a Lease) and
# general pod stages, as its release ships them. A Job's pod completes 1-6 s after Ready unless it
# carries pod-complete.stage.kwok.x-k8s.io/delay (the e2e runtimes set it).
kwok_config() {
  local dir
  dir="$(cd "$run" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir/kustomize/stage" ]] || die "kwok's stages not found in the module cache"
  local f
  for f in "$dir"/kustomize/stage/node/fast/node-initialize.yaml \
    "$dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$dir"/kustomize/stage/pod/general/pod-*.yaml; do
    cat "$f"; echo "---"
  done >"$run/kwok.yaml"
}

# Fake nodes in two zones, managed by kwok (label type=kwok), with room for every test's pods.
create_nodes() {
  local zone i
  for zone in a b; do
    for i in 0 1; do
      cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: kwok-$zone-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, topology.kubernetes.io/zone: zone-$zone, kubernetes.io/hostname: kwok-$zone-$i, e2e.trainguard.io/pool: pool-$zone}
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8", ephemeral-storage: 1Ti}
  capacity: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8", ephemeral-storage: 1Ti}
---
YAML
    done
  done >"$run/nodes.yaml"
  kctl apply -f "$run/nodes.yaml" >/dev/null
  wait_for "kwok nodes Ready" 60 kctl wait --for condition=Ready --timeout=5s node -l type=kwok
}

certs() {
  local d="$run/certs"
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=trainguard-e2e-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  issue() { # name subject extensions
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$d/$1.key" -out "$d/$1.csr" 2>/dev/null
    openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile <(printf '%s\n' "$3") -out "$d/$1.crt" 2>/dev/null
    rm -f "$d/$1.csr"
  }
  local serving="subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
  # The API server's certificate also names the `kubernetes` Service's cluster IP (the first of
  # --service-cluster-ip-range), where pods on the real node reach it (in-cluster clients dial
  # KUBERNETES_SERVICE_HOST, an IP).
  issue apiserver "/CN=kube-apiserver" "${serving/IP:127.0.0.1,/IP:127.0.0.1,IP:$SERVICE_APISERVER_IP,}"
  issue webhooks "/CN=webhooks" "$serving"
  issue admin "/O=system:masters/CN=e2e-admin" "extendedKeyUsage=clientAuth"
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  for name in jobset trainer; do
    mkdir -p "$d/$name"
    cp "$d/webhooks.crt" "$d/$name/tls.crt"; cp "$d/webhooks.key" "$d/$name/tls.key"
  done
}

kubeconfig() { # file user-entries...
  cat >"$1" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$P_APISERVER
    certificate-authority: $run/certs/ca.crt
contexts:
- name: e2e
  context: {cluster: e2e, user: user}
current-context: e2e
users:
- name: user
  user:
$2
YAML
}

apply_upstream_manifests() {
  local trainer jobset
  trainer="$(cd "$run" && go mod download -json "github.com/kubeflow/trainer/v2@$TRAINER_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  jobset="$(cd "$run" && go mod download -json "sigs.k8s.io/jobset@$JOBSET_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$trainer/manifests" && -d "$jobset/config" ]] || die "Trainer or JobSet manifests not found in the module cache"
  echo "TRAINER_MODULE_DIR=$trainer" >>"$run/env"
  local crd
  for crd in "$jobset"/config/components/crd/bases/*.yaml "$trainer"/manifests/base/crds/trainer.kubeflow.org_*.yaml; do
    kctl apply --server-side -f "$crd" >/dev/null
  done
  kctl wait --for condition=established --timeout=60s crd/jobsets.jobset.x-k8s.io crd/trainjobs.trainer.kubeflow.org \
    crd/clustertrainingruntimes.trainer.kubeflow.org crd/trainingruntimes.trainer.kubeflow.org >/dev/null
  # Webhook configurations as their releases ship them, pointed at the loopback controllers.
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_JOBSET_WH" "$run/certs/ca.crt" \
    <"$jobset/config/components/webhook/manifests.yaml" >"$run/jobset-webhooks.yaml"
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_TRAINER_WH" "$run/certs/ca.crt" \
    <"$trainer/manifests/base/webhook/manifests.yaml" >"$run/trainer-webhooks.yaml"
  sed -i 's/name: mutating-webhook-configuration/name: jobset-mutating/; s/name: validating-webhook-configuration/name: jobset-validating/' "$run/jobset-webhooks.yaml"
  sed -i 's/name: mutating-webhook-configuration/name: trainer-mutating/; s/name: validating-webhook-configuration/name: trainer-validating/' "$run/trainer-webhooks.yaml"
  # Tests that pin the exact text trainguard sends, or want the API server's own verdict, take
  # Trainer's TrainJob webhooks (validator and defaulter) out of their namespace (label
  # e2e.trainguard.io/trainer-webhook=off); everywhere else Trainer's and trainguard's webhooks run.
  python3 - "$run/trainer-webhooks.yaml" <<'PY'
import sys, yaml
path = sys.argv[1]
docs = list(yaml.safe_load_all(open(path)))
for d in docs:
    for hook in d.get("webhooks", []):
        if hook["name"] in ("validator.trainjob.trainer.kubeflow.org", "defaulter.trainjob.trainer.kubeflow.org"):
            hook["namespaceSelector"] = {"matchExpressions": [{"key": "e2e.trainguard.io/trainer-webhook", "operator": "NotIn", "values": ["off"]}]}
yaml.safe_dump_all(docs, open(path, "w"), sort_keys=False)
PY
}

start_upstream_controllers() {
  kubeconfig "$run/admin.kubeconfig" "    client-certificate: $run/certs/admin.crt
    client-key: $run/certs/admin.key"
  cat >"$run/jobset-config.yaml" <<YAML
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {port: $P_JOBSET_WH, host: 127.0.0.1, certDir: $run/certs/jobset}
metrics: {bindAddress: "127.0.0.1:$P_JOBSET_METRICS"}
health: {healthProbeBindAddress: "127.0.0.1:$P_JOBSET_PROBE"}
YAML
  start jobset "$BIN/jobset" --kubeconfig "$run/admin.kubeconfig" --config "$run/jobset-config.yaml" \
    --metrics-bind-address "127.0.0.1:$P_JOBSET_METRICS" --health-probe-bind-address "127.0.0.1:$P_JOBSET_PROBE"
  cat >"$run/trainer-config.yaml" <<YAML
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health: {healthProbeBindAddress: "127.0.0.1:$P_TRAINER_PROBE", readinessEndpointName: readyz, livenessEndpointName: healthz}
metrics: {bindAddress: "127.0.0.1:$P_TRAINER_METRICS", secureServing: false}
webhook: {port: $P_TRAINER_WH, host: 127.0.0.1}
leaderElection: {leaderElect: false}
certManagement: {enable: false}
statusServer: {port: $P_TRAINER_STATUS}
YAML
  # Trainer has no certDir setting: controller-runtime reads $TMPDIR/k8s-webhook-server/serving-certs.
  mkdir -p "$run/tmp/trainer/k8s-webhook-server/serving-certs"
  cp "$run/certs/trainer/"tls.* "$run/tmp/trainer/k8s-webhook-server/serving-certs/"
  start trainer "$BIN/trainer-controller-manager" --kubeconfig "$run/admin.kubeconfig" --config "$run/trainer-config.yaml"
  started jobset "JobSet's controller" 60 curl -sf --max-time 5 "http://127.0.0.1:$P_JOBSET_PROBE/readyz"
  started trainer "Trainer's controller" 60 curl -sf --max-time 5 "http://127.0.0.1:$P_TRAINER_PROBE/readyz"
  kctl apply -f "$run/jobset-webhooks.yaml" -f "$run/trainer-webhooks.yaml" >/dev/null
}

# trainguard as shipped: deploy/base with the opt-out policy, rendered by kustomize; everything but
# what would run it in-cluster (Deployments, Service, PDB, NetworkPolicy) is applied, and each
# Deployment's args run here as a process with a token of its own ServiceAccount (not admin).
install_trainguard() {
  mkdir -p "$run/kustomize"
  # kustomize takes only relative paths to other kustomizations.
  local rel
  rel="$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$root/deploy" "$run/kustomize")"
  cat >"$run/kustomize/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel/base]
components: [$rel/components/opt-out-policy]
YAML
  kctl kustomize "$run/kustomize" >"$run/trainguard-rendered.yaml"
  # The act-mode write permissions, kept aside: a test that switches the controller to act mode
  # applies them, as an operator who enables act mode does (deploy/components/act-rbac).
  mkdir -p "$run/kustomize-act"
  cat >"$run/kustomize-act/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: trainguard-system
components: [$rel/components/act-rbac]
YAML
  kctl kustomize "$run/kustomize-act" >"$run/trainguard-act-rbac.yaml"
  # The opt-in defaults (the mutating webhook, the MutatingAdmissionPolicy), kept aside too: the
  # tests that need them apply and remove them (tests/e2e/policy.rs). The webhook's component
  # copies the validating configuration's clientConfig, so it is rendered with the base.
  mkdir -p "$run/kustomize-defaults"
  cat >"$run/kustomize-defaults/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$rel/base]
components: [$rel/components/mutating-webhook, $rel/components/mutating-policy]
YAML
  kctl kustomize "$run/kustomize-defaults" >"$run/trainguard-defaults-rendered.yaml"
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_TRAINGUARD" "$run/certs/ca.crt" \
    --only MutatingWebhookConfiguration \
    <"$run/trainguard-defaults-rendered.yaml" >"$run/trainguard-mutating-webhook.yaml"
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_TRAINGUARD" "$run/certs/ca.crt" \
    --only MutatingAdmissionPolicy,MutatingAdmissionPolicyBinding \
    <"$run/trainguard-defaults-rendered.yaml" >"$run/trainguard-mutating-policy.yaml"
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_TRAINGUARD" "$run/certs/ca.crt" \
    --only ValidatingWebhookConfiguration,MutatingWebhookConfiguration \
    <"$run/trainguard-rendered.yaml" >"$run/trainguard-webhooks.yaml"
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_TRAINGUARD" "$run/certs/ca.crt" \
    --skip ValidatingWebhookConfiguration,MutatingWebhookConfiguration,Deployment,Service,PodDisruptionBudget,NetworkPolicy \
    <"$run/trainguard-rendered.yaml" >"$run/trainguard-rest.yaml"
  kctl apply -f "$run/trainguard-rest.yaml" >/dev/null
  local component token
  for component in webhook controller; do
    token="$(kctl -n trainguard-system create token "trainguard-$component" --duration=48h)"
    kubeconfig "$run/trainguard-$component.kubeconfig" "    token: $token"
    python3 "$root/scripts/e2e/trainguard-args.py" "$component" "127.0.0.1:$P_TRAINGUARD" \
      "127.0.0.1:$([[ $component == webhook ]] && echo "$P_TRAINGUARD_ADMIN" || echo "$P_TRAINGUARD_CTRL_ADMIN")" \
      "$run/certs/webhooks.crt" "$run/certs/webhooks.key" <"$run/trainguard-rendered.yaml" >"$run/trainguard-$component.args"
  done
}

start_trainguard() { # component (webhook | controller), extra args...
  local component="$1" admin; shift
  [[ $component == webhook ]] && admin=$P_TRAINGUARD_ADMIN || admin=$P_TRAINGUARD_CTRL_ADMIN
  [[ -x "${TRAINGUARD_BIN:-}" ]] || TRAINGUARD_BIN="$(grep '^TRAINGUARD_BIN=' "$run/env" | cut -d= -f2)"
  local args=() envs=(POD_NAME="trainguard-$component-e2e" POD_NAMESPACE=trainguard-system) line
  while IFS= read -r line; do
    case "$line" in arg:*) args+=("${line#arg:}") ;; env:*) envs+=("${line#env:}") ;; esac
  done <"$run/trainguard-$component.args"
  start "trainguard-$component" env "${envs[@]}" "$TRAINGUARD_BIN" "${args[@]}" \
    --kubeconfig "$run/trainguard-$component.kubeconfig" "$@"
  started "trainguard-$component" "trainguard's $component ready" 60 curl -sf --max-time 5 "http://127.0.0.1:$admin/readyz"
}

# trainguard's registration as `up` made it, after a test installed trainguard itself on the real
# node (tests/e2e/installed.rs) and perhaps uninstalled it as docs/operations.md says, which
# deletes the namespace with the ServiceAccounts whose tokens the plane's processes hold: the
# processes stopped, the objects applied again once the namespace is usable, new tokens, the
# processes started, the webhook configurations last (as `up` orders them).
restore_trainguard() {
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" | cut -d= -f2)"
  stop trainguard-webhook
  stop trainguard-controller
  wait_for "namespace trainguard-system not terminating" 180 namespace_usable trainguard-system
  register_trainguard
}

# trainguard's objects, its processes, then its webhook configurations, last; and a wait until
# the API server calls them, so that no test can meet a plane on which trainguard's verdicts are
# not yet in force (the API server picks configurations up asynchronously).
register_trainguard() {
  install_trainguard
  start_trainguard webhook
  start_trainguard controller
  kctl apply -f "$run/trainguard-webhooks.yaml" >/dev/null
  wait_for "the API server calling trainguard's webhooks" 60 webhook_called
}

namespace_usable() { # name: absent or active, not terminating
  [[ "$(kctl get namespace "$1" -o jsonpath='{.status.phase}' --ignore-not-found)" != Terminating ]]
}

webhook_requests() { # trainguard's webhook: requests served so far
  curl -sf --max-time 5 "http://127.0.0.1:$P_TRAINGUARD_ADMIN/metrics" \
    | awk '/^controller_runtime_webhook_requests_total/ {n += $NF} END {print n + 0}'
}

webhook_called() {
  local before after
  before="$(webhook_requests)" || return 1
  kctl -n default create --dry-run=server -f - >/dev/null 2>&1 <<YAML || true
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: plane-probe}
spec: {suspend: true, runtimeRef: {name: e2e-torch}}
YAML
  after="$(webhook_requests)" || return 1
  ((after > before))
}

up() {
  BIN="$("$root/scripts/e2e/build.sh" kube jobset trainer kwok)"
  [[ -x "${TRAINGUARD_BIN:-}" ]] || die "set TRAINGUARD_BIN to a built trainguard binary (make e2e does)"
  down 2>/dev/null || true
  rm -rf "$run"; mkdir -p "$run"
  local t0=$SECONDS
  certs
  cat >"$run/env" <<ENV
E2E_BIN=$BIN
E2E_RUN=$run
KUBECONFIG=$run/admin.kubeconfig
KUBECTL=$BIN/kubectl
KUBECTL_CACHE=$run/kubectl-cache
TRAINGUARD_BIN=$TRAINGUARD_BIN
TRAINGUARD_PORT=$P_TRAINGUARD
TRAINGUARD_ADMIN_PORT=$P_TRAINGUARD_ADMIN
TRAINGUARD_CONTROLLER_ADMIN_PORT=$P_TRAINGUARD_CTRL_ADMIN
APISERVER_PORT=$P_APISERVER
PORT_BASE=$base
KWOK_VERSION=$KWOK_VERSION
TRAINER_VERSION=$TRAINER_VERSION
TRAINING_OPERATOR_VERSION=$TRAINING_OPERATOR_VERSION
KUBERNETES_VERSION=$KUBERNETES_VERSION
KUBERNETES_MINOR=$kubernetes_minor
ENV
  # etcd on tmpfs where there is one: the plane is thrown away after each run.
  local data=/dev/shm; [[ -w $data ]] || data="$run"
  mkdir -p "$data/trainguard-e2e-etcd-$base"; rm -rf "$data/trainguard-e2e-etcd-$base"
  echo "ETCD_DATA=$data/trainguard-e2e-etcd-$base" >>"$run/env"
  start etcd "$BIN/etcd" --name e2e --data-dir "$data/trainguard-e2e-etcd-$base" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$P_ETCD" --advertise-client-urls "http://127.0.0.1:$P_ETCD" \
    --listen-peer-urls "http://127.0.0.1:$P_ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$P_ETCD_PEER" \
    --initial-cluster "e2e=http://127.0.0.1:$P_ETCD_PEER" --listen-metrics-urls ""
  started etcd etcd 30 curl -sf --max-time 5 "http://127.0.0.1:$P_ETCD/health"

  # No endpoint reconciler: a loopback advertise address cannot be written to the `kubernetes`
  # Service's Endpoints (v1.37 refuses to start with one under the lease or master-count
  # reconciler; v1.36 started and failed each write). The real node (`node start`) writes them
  # itself, to its bridge address, where a relay forwards to this loopback port.
  # PodNodeSelector and PodTolerationRestriction act only on namespaces annotated for them
  # (scheduler.alpha.kubernetes.io/node-selector, .../defaultTolerations): how the tests place a
  # shipped Deployment, unchanged, on the real node, as a cluster admin places a namespace.
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$P_ETCD" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$P_APISERVER" \
    --endpoint-reconciler-type none \
    --cert-dir "$run/tmp/kube-apiserver" \
    --tls-cert-file "$run/certs/apiserver.crt" --tls-private-key-file "$run/certs/apiserver.key" \
    --client-ca-file "$run/certs/ca.crt" --authorization-mode RBAC \
    --service-account-issuer "https://127.0.0.1:$P_APISERVER" \
    --service-account-key-file "$run/certs/sa.pub" --service-account-signing-key-file "$run/certs/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged \
    --enable-admission-plugins PodNodeSelector,PodTolerationRestriction \
    --kubelet-client-certificate "$run/certs/admin.crt" --kubelet-client-key "$run/certs/admin.key" \
    --kubelet-preferred-address-types InternalIP,Hostname \
    --audit-policy-file "$root/e2e/audit-policy.yaml" --audit-log-path "$run/logs/audit.log" \
    --audit-log-format json \
    --default-unreachable-toleration-seconds "${E2E_TOLERATION_SECONDS:-30}" \
    --default-not-ready-toleration-seconds "${E2E_TOLERATION_SECONDS:-30}"
  started kube-apiserver kube-apiserver 90 curl -sf --max-time 5 --cacert "$run/certs/ca.crt" \
    --cert "$run/certs/admin.crt" --key "$run/certs/admin.key" "https://127.0.0.1:$P_APISERVER/readyz"
  kubeconfig "$run/admin.kubeconfig" "    client-certificate: $run/certs/admin.crt
    client-key: $run/certs/admin.key"

  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$run/admin.kubeconfig" \
    --authentication-kubeconfig "$run/admin.kubeconfig" --authorization-kubeconfig "$run/admin.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$P_KCM" \
    --controllers job-controller,garbage-collector-controller,node-lifecycle-controller,taint-eviction-controller,pod-garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller \
    --service-account-private-key-file "$run/certs/sa.key" --root-ca-file "$run/certs/ca.crt" \
    --node-monitor-period "${E2E_NODE_MONITOR_PERIOD:-2s}" \
    --node-monitor-grace-period "${E2E_NODE_MONITOR_GRACE:-20s}"
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$run/admin.kubeconfig" \
    --authentication-kubeconfig "$run/admin.kubeconfig" --authorization-kubeconfig "$run/admin.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$P_SCHED"
  kwok_config
  start kwok "$BIN/kwok" --kubeconfig "$run/admin.kubeconfig" --config "$run/kwok.yaml" \
    --manage-nodes-with-label-selector type=kwok --server-address "127.0.0.1:$P_KWOK" \
    --node-lease-duration-seconds 10
  started kube-controller-manager kube-controller-manager 60 curl -sfk --max-time 5 "https://127.0.0.1:$P_KCM/healthz"
  started kube-scheduler kube-scheduler 60 curl -sfk --max-time 5 "https://127.0.0.1:$P_SCHED/healthz"
  started kwok kwok 30 curl -sf --max-time 5 "http://127.0.0.1:$P_KWOK/healthz"

  create_nodes
  apply_upstream_manifests
  start_upstream_controllers
  # The tests' runtimes.
  kctl apply --server-side -f "$root/e2e/manifests/runtimes.yaml" >/dev/null
  # Trainer's own default runtime, which the manifests under tests/data name.
  kctl apply --server-side -f "$(grep '^TRAINER_MODULE_DIR=' "$run/env" | cut -d= -f2)/manifests/base/runtimes/torch_distributed.yaml" >/dev/null
  # trainguard's probe (a server-side dry-run CREATE raising its request count) names a runtime.
  register_trainguard
  echo "PLANE_UP_SECONDS=$((SECONDS - t0))" >>"$run/env"
  log "up in $((SECONDS - t0)) s: KUBECONFIG=$run/admin.kubeconfig (logs in $run/logs)"
  echo "$run"
}

# A kwok of its own for some nodes (label selector), so a test can lose exactly those nodes by
# stopping it: their Lease and status stop, as when a kubelet dies. The shared kwok manages only
# type=kwok, so such nodes carry another type. Its stages are the shared kwok's plus kwok's chaos
# node-not-ready stage (a node labelled node-not-ready.stage.kwok.x-k8s.io=true reports Ready=False
# while its Lease stays fresh: a kubelet that still reports).
start_kwok() { # name selector [no-pod-delete]
  local name="$1" selector="$2" port config="$run/kwok-chaos.yaml"
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" | cut -d= -f2)"
  if [[ ! -f "$run/kwok-chaos.yaml" ]]; then
    local dir
    dir="$(cd "$run" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
    { cat "$run/kwok.yaml"; cat "$dir/kustomize/stage/node/chaos/node-not-ready.yaml"; echo "---"; } >"$run/kwok-chaos.yaml"
  fi
  if [[ "${3:-}" == no-pod-delete ]]; then
    # A kubelet that reports but never finishes a pod's deletion (a hung container runtime).
    config="$run/kwok-chaos-no-pod-delete.yaml"
    python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["metadata"]["name"] != "pod-delete"]
yaml.safe_dump_all(docs, open(sys.argv[2], "w"), sort_keys=False)' "$run/kwok-chaos.yaml" "$config"
  fi
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  stop "kwok-$name"
  start "kwok-$name" "$BIN/kwok" --kubeconfig "$run/admin.kubeconfig" --config "$config" \
    --manage-nodes-with-label-selector "$selector" --server-address "127.0.0.1:$port" \
    --node-lease-duration-seconds 10
  started "kwok-$name" "kwok $name" 30 curl -sf --max-time 5 "http://127.0.0.1:$port/healthz"
}

# A second controller process (leader election tests): the shipped controller args with its own
# name (POD_NAME, so its own Lease identity), admin port and log, extra args appended.
start_controller_replica() { # name admin-port extra args...
  local name="$1" port="$2"; shift 2
  [[ -x "${TRAINGUARD_BIN:-}" ]] || TRAINGUARD_BIN="$(grep '^TRAINGUARD_BIN=' "$run/env" | cut -d= -f2)"
  local args=() envs=(POD_NAME="$name" POD_NAMESPACE=trainguard-system) line
  while IFS= read -r line; do
    case "$line" in
      arg:--admin-bind=*) args+=("--admin-bind=127.0.0.1:$port") ;;
      arg:*) args+=("${line#arg:}") ;;
      env:*) envs+=("${line#env:}") ;;
    esac
  done <"$run/trainguard-controller.args"
  start "$name" env "${envs[@]}" "$TRAINGUARD_BIN" "${args[@]}" \
    --kubeconfig "$run/trainguard-controller.kubeconfig" "$@"
  started "$name" "controller replica $name" 60 curl -sf --max-time 5 "http://127.0.0.1:$port/healthz"
}

# Kueue, only while a test needs it: its CRDs (the conversion webhooks pointed at the loopback
# controller), its webhooks for its own kinds and the integrations enabled here (TrainJob,
# PyTorchJob and TFJob when Training Operator's CRDs are installed), and its controller. `kueue stop` removes
# the webhook configurations first, so nothing else waits on a Kueue that is not running; the
# CRDs and their objects stay (the next start finds them).
start_kueue() {
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" | cut -d= -f2)"
  "$root/scripts/e2e/build.sh" kueue >/dev/null
  local dir ca
  dir="$(cd "$run" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir/config/components/crd/bases" ]] || die "Kueue's manifests not found in the module cache"
  ca="$(base64 -w0 "$run/certs/ca.crt")"
  python3 - "$dir/config/components/crd/bases" "$P_KUEUE_WH" "$ca" >"$run/kueue-crds.yaml" <<'PY'
import glob, sys, yaml
bases, port, ca = sys.argv[1:]
# The CRDs config/components/crd/kustomization.yaml patches with a conversion webhook.
converted = {"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}
docs = []
for f in sorted(glob.glob(bases + "/*.yaml")):
    for d in yaml.safe_load_all(open(f)):
        if d and d["spec"]["names"]["plural"] in converted:
            d["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": f"https://127.0.0.1:{port}/convert", "caBundle": ca},
                "conversionReviewVersions": ["v1"]}}
        if d:
            docs.append(d)
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
PY
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_KUEUE_WH" "$run/certs/ca.crt" \
    <"$dir/config/components/webhook/manifests.yaml" | python3 -c '
import sys, yaml
keep = lambda h: any(g in ("kueue.x-k8s.io", "trainer.kubeflow.org") or (g == "kubeflow.org" and {"pytorchjobs", "tfjobs"} & set(r["resources"]))
                     for r in h["rules"] for g in r["apiGroups"])
docs = list(yaml.safe_load_all(sys.stdin))
for d in docs:
    d["metadata"]["name"] = "kueue-" + ("mutating" if d["kind"].startswith("Mutating") else "validating")
    d["webhooks"] = [h for h in d["webhooks"] if keep(h)]
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)' >"$run/kueue-webhooks.yaml"
  kctl apply --server-side --force-conflicts -f "$run/kueue-crds.yaml" >/dev/null
  # (a CRD just created has no status yet: kubectl wait fails at once on it, so poll.)
  wait_for "Kueue's CRDs established" 60 kctl wait --for condition=established --timeout=5s \
    crd/workloads.kueue.x-k8s.io crd/clusterqueues.kueue.x-k8s.io crd/localqueues.kueue.x-k8s.io \
    crd/resourceflavors.kueue.x-k8s.io crd/workloadpriorityclasses.kueue.x-k8s.io
  kctl get namespace kueue-system >/dev/null 2>&1 || kctl create namespace kueue-system >/dev/null
  local frameworks='"trainer.kubeflow.org/trainjob"'
  kctl get crd pytorchjobs.kubeflow.org >/dev/null 2>&1 && frameworks+=', "kubeflow.org/pytorchjob"'
  kctl get crd tfjobs.kubeflow.org >/dev/null 2>&1 && frameworks+=', "kubeflow.org/tfjob"'
  mkdir -p "$run/certs/kueue"
  cp "$run/certs/webhooks.crt" "$run/certs/kueue/tls.crt"; cp "$run/certs/webhooks.key" "$run/certs/kueue/tls.key"
  cat >"$run/kueue-config.yaml" <<YAML
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$P_KUEUE_PROBE"}
metrics: {bindAddress: "127.0.0.1:$P_KUEUE_METRICS"}
webhook: {port: $P_KUEUE_WH, host: 127.0.0.1, certDir: $run/certs/kueue}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
manageJobsWithoutQueueName: false
integrations:
  frameworks: [$frameworks]
YAML
  # Without internal certificate management Kueue v0.19 reads its metrics serving certificate
  # from a fixed path (cmd/kueue/main.go), /etc/kueue/metrics/certs; any valid pair will do there.
  # Kueue alone sees them: /etc is overlaid in its own mount namespace, the upper layer in $run.
  local etc="$run/mounts/kueue-etc"
  mkdir -p "$etc/upper/kueue/metrics/certs" "$etc/work"
  cp "$run/certs/webhooks.crt" "$etc/upper/kueue/metrics/certs/tls.crt"
  cp "$run/certs/webhooks.key" "$etc/upper/kueue/metrics/certs/tls.key"
  can_unshare || die "Kueue's fixed certificate path /etc/kueue/metrics/certs needs a private mount namespace (root and unshare): run make e2e as root"
  stop kueue
  start kueue env KUBECONFIG="$run/admin.kubeconfig" unshare -m --propagation private \
    sh -c 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$0/upper,workdir=$0/work" /etc && exec "$@"' "$etc" \
    "$BIN/kueue" --config "$run/kueue-config.yaml" \
    --kubeconfig "$run/admin.kubeconfig" --feature-gates=VisibilityOnDemand=false
  started kueue "Kueue's controller" 90 curl -sf --max-time 5 "http://127.0.0.1:$P_KUEUE_PROBE/readyz"
  kctl apply -f "$run/kueue-webhooks.yaml" >/dev/null
}

stop_kueue() {
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" | cut -d= -f2)"
  kctl delete --ignore-not-found validatingwebhookconfiguration kueue-validating >/dev/null 2>&1 || true
  kctl delete --ignore-not-found mutatingwebhookconfiguration kueue-mutating >/dev/null 2>&1 || true
  stop kueue
}

# Training Operator v1, only while a test needs it, at TRAINING_OPERATOR_VERSION or the release
# given (built by `build.sh training-operator@VERSION`): the CRDs of every kind that release has
# (from its module's manifests/base/crds; not MXJob, which trainguard does not claim, where an old
# release still has it), their validating webhooks pointed at the loopback operator, and the operator
# with one --enable-scheme per kind (v1.9.x: tfjob pytorchjob mpijob xgboostjob paddlejob jaxjob;
# v1.8.0 has no JAXJob). A CRD another release installed stays (its kind then has no controller). It always
# runs its certificate rotator (cert-controller): the Secret it reads is created beforehand with a
# CA and a serving certificate valid for its Service name and 127.0.0.1, for longer than the
# rotator's 90-day look-ahead, so it keeps them, writes them to its fixed certificate directory
# (/tmp/k8s-webhook-server/serving-certs: bind-mounted per plane where unshare allows) and injects
# the CA into its webhook configuration.
start_training_operator() {
  local version="${1:-$TRAINING_OPERATOR_VERSION}" exe
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" | cut -d= -f2)"
  if [[ $version == "$TRAINING_OPERATOR_VERSION" ]]; then
    "$root/scripts/e2e/build.sh" training-operator >/dev/null
    exe="$BIN/training-operator"
  else
    "$root/scripts/e2e/build.sh" "training-operator@$version" >/dev/null
    exe="$BIN/training-operator-$version"
  fi
  local dir d="$run/certs/training-operator" f plural plurals=() schemes=() crds=() names=()
  dir="$(cd "$run" && go mod download -json "github.com/kubeflow/training-operator@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$dir/manifests/base/crds" ]] || die "Training Operator's manifests not found in the module cache"
  for f in "$dir"/manifests/base/crds/kubeflow.org_*.yaml; do
    plural="$(basename "$f" .yaml)"; plural="${plural#kubeflow.org_}"
    [[ $plural == mxjobs ]] && continue
    plurals+=("$plural"); schemes+=("--enable-scheme=${plural%s}"); crds+=(-f "$f"); names+=("crd/$plural.kubeflow.org")
  done
  kctl apply --server-side --force-conflicts "${crds[@]}" >/dev/null
  wait_for "the Training Operator's CRDs established" 60 kctl wait --for condition=established --timeout=5s "${names[@]}"
  if [[ ! -f "$d/tls.crt" ]]; then
    mkdir -p "$d"
    # The rotator verifies the CA against its own name (a SAN, not the CN).
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/O=training-operator/CN=training-operator-ca" \
      -addext "subjectAltName=DNS:training-operator-ca" -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=training-operator.kubeflow.svc" -keyout "$d/tls.key" -out "$d/tls.csr" 2>/dev/null
    openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 -out "$d/tls.crt" \
      -extfile <(printf 'subjectAltName=DNS:training-operator.kubeflow.svc,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') 2>/dev/null
    rm -f "$d/tls.csr"
    # It parses the CA key as PKCS#1 only.
    openssl rsa -in "$d/ca.key" -traditional -out "$d/ca.key" 2>/dev/null
  fi
  kctl get namespace kubeflow >/dev/null 2>&1 || kctl create namespace kubeflow >/dev/null
  kctl -n kubeflow create secret generic training-operator-webhook-cert --dry-run=client -o yaml \
    --from-file=ca.crt="$d/ca.crt" --from-file=ca.key="$d/ca.key" --from-file=tls.crt="$d/tls.crt" --from-file=tls.key="$d/tls.key" \
    | kctl apply -f - >/dev/null
  python3 "$root/scripts/e2e/rewrite-webhooks.py" "$P_TO_WH" "$d/ca.crt" <"$dir/manifests/base/webhook/manifests.yaml" | python3 -c '
import sys, yaml
docs = list(yaml.safe_load_all(sys.stdin))
for d in docs:
    d["metadata"]["name"] = "validator.training-operator.kubeflow.org"
    d["webhooks"] = [h for h in d["webhooks"] if set(h["rules"][0]["resources"]) <= set(sys.argv[1:])]
yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)' "${plurals[@]}" >"$run/training-operator-webhooks.yaml"
  kctl apply -f "$run/training-operator-webhooks.yaml" >/dev/null
  local certs="$run/tmp/training-operator/k8s-webhook-server"
  # What the kubelet would mount from the Secret: the rotator waits for tls.crt there.
  mkdir -p "$certs/serving-certs"
  cp "$d/ca.crt" "$d/tls.crt" "$d/tls.key" "$certs/serving-certs/"
  # Its fixed path /tmp/k8s-webhook-server exists only in the operator's own mount namespace: /tmp
  # there is a fresh tmpfs holding that path (bound to $certs), with the run directory and the
  # binaries bound back from the real /tmp where they live under it (a HOME or cache in /tmp; the
  # real /tmp kept at /mnt for the moment of the swap), so nothing is written to /tmp. Another
  # release's binary is a link into a cache of its own: its directory is bound back too.
  can_unshare || die "the Training Operator's fixed certificate path /tmp/k8s-webhook-server needs a private mount namespace (root and unshare): run make e2e as root"
  local wrap=(unshare -m --propagation private sh -c '
    set -e
    certs=$1
    shift
    mount --bind /tmp /mnt
    mount -t tmpfs -o size=16m tmpfs /tmp
    while [ "$1" != -- ]; do
      case "$1" in /tmp/*) mkdir -p "$1" && mount --bind "/mnt/${1#/tmp/}" "$1" ;; esac
      shift
    done
    shift
    mkdir -p /tmp/k8s-webhook-server
    mount --bind "$certs" /tmp/k8s-webhook-server
    umount -l /mnt
    exec "$@"' sh "$certs" "$run" "$BIN" "$(dirname "$(readlink -f "$exe")")" --)
  stop training-operator
  start training-operator env KUBECONFIG="$run/admin.kubeconfig" MY_POD_NAMESPACE=kubeflow "${wrap[@]}" \
    "$exe" "${schemes[@]}" --webhook-server-port "$P_TO_WH" \
    --metrics-bind-address "127.0.0.1:$P_TO_METRICS" --health-probe-bind-address "127.0.0.1:$P_TO_PROBE"
  started training-operator "Training Operator $version" 90 curl -sf --max-time 5 "http://127.0.0.1:$P_TO_PROBE/readyz"
}

can_unshare() { unshare -m --propagation private true 2>/dev/null; }

stop_training_operator() {
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" | cut -d= -f2)"
  kctl delete --ignore-not-found validatingwebhookconfiguration validator.training-operator.kubeflow.org >/dev/null 2>&1 || true
  stop training-operator
}

# A real node beside the kwok nodes: containerd 2.x (its runc shim, runc with seccomp, the pause
# image built from the Kubernetes module's source) and a kubelet from the plane's Kubernetes build.
# Named e2e-real-<base>, labelled type=real, tainted e2e.trainguard.io/real-node=true:NoSchedule so
# only what a test places there (with the toleration) runs on it. Its pods get addresses on a bridge
# the node creates (tg<base>, pod range 10.244.<base/1000>.0/24, the bridge holding .1), with no
# gateway and no masquerading: they reach the host's bridge address and each other, nothing else,
# and nothing routes off the machine. Everything lives under $run/node and is unmounted, deleted and
# stopped by `node stop` (and by `down`). Beside the kubelet: kube-proxy and what Services and
# Deployments need (start_node_services), and kube-network-policies, which enforces NetworkPolicy
# on the node's pods (start_network_policies). Pods reach only the Service range through the host:
# the host does not forward (net.ipv4.ip_forward stays as it is, 0 here), so a pod reaches another
# pod on the bridge directly, not through a Service.
node_vars() {
  NODE_NAME="e2e-real-$base"
  NODE_DIR="$run/node"
  NODE_BRIDGE="tg$base"
  local third=$(( (base / 1000) % 256 ))
  NODE_POD_CIDR="10.244.$third.0/24"
  NODE_IP="10.244.$third.1"
  NODE_SOCK="$NODE_DIR/containerd/containerd.sock"
}

# ctr against the node's containerd, without its cgroup v1 deprecation notice on every call.
nctr() { "$BIN/ctr" --address "$NODE_SOCK" -n k8s.io "$@" 2> >(grep -v 'support for cgroup v1 is deprecated' >&2); }

start_node() {
  [[ $(id -u) -eq 0 ]] || die "the real node needs root (containerd, runc, mounts, a bridge)"
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" | cut -d= -f2)"
  BIN="$("$root/scripts/e2e/build.sh" node)"
  node_vars
  stop_node 2>/dev/null || true
  local t0=$SECONDS nd="$NODE_DIR"
  mkdir -p "$nd"/{containerd,kubelet,pod-logs,cni/net.d,cni/ipam,certs}
  # The bridge first, with the host's address on it: the kubelet serves on it (so the API server
  # reaches it for logs and exec) and probes pods from it.
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_IP/24" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Service addresses lead onto the bridge, from the bridge address: what kube-proxy has not (yet)
  # translated goes nowhere, rather than to the default route.
  ip route add "$SERVICE_CIDR" dev "$NODE_BRIDGE" src "$NODE_IP"
  cat >"$nd/cni/net.d/10-trainguard-e2e.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "trainguard-e2e", "plugins": [
  {"type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$NODE_POD_CIDR", "rangeStart": "${NODE_IP%.1}.10"}]],
            "routes": [{"dst": "$SERVICE_CIDR", "gw": "$NODE_IP"}], "dataDir": "$nd/cni/ipam"}}]}
JSON
  local pause_tag
  pause_tag="$(cat "$BIN/pause.tag")"
  cat >"$nd/containerd.toml" <<TOML
version = 3
root = "$nd/containerd/root"
state = "$nd/containerd/state"
[grpc]
  address = "$NODE_SOCK"
[ttrpc]
  address = "$NODE_SOCK.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'docker.io/local/pause:$pause_tag'
[plugins.'io.containerd.cri.v1.runtime']
  # Negative OOM scores are refused on some machines even to root: without this every sandbox
  # (oom_score_adj -998) dies at start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = '$BIN/runc'
      Root = '$nd/containerd/runc'
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '$nd/cni/net.d'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.internal.v1.opt']
  path = '$nd/containerd/opt'
TOML
  # Its shim first on PATH: a 1.x shim elsewhere on the machine cannot serve a 2.x daemon.
  start node-containerd env PATH="$BIN:$PATH" "$BIN/containerd" --config "$nd/containerd.toml"
  started node-containerd containerd 60 nctr version
  nctr images import --base-name docker.io/local/pause "$BIN/pause.oci.tar" >/dev/null
  local image="${TRAINGUARD_IMAGE:-${CARGO_TARGET_DIR:-$root/target}/image/trainguard.oci.tar}" image_ref=""
  if [[ -f "$image" ]]; then
    nctr images import --base-name docker.io/local/trainguard "$image" >/dev/null
    image_ref="docker.io/local/trainguard:$(tar -xOf "$image" ./index.json | python3 -c 'import json, sys; print(json.load(sys.stdin)["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])')"
  else
    log "no trainguard image at $image (make image): the node runs without it"
  fi
  # The tests' client pods (busybox: wget, nc), for what the NetworkPolicy lets through.
  nctr images import --base-name docker.io/local/client "$BIN/client.oci.tar" >/dev/null

  # The kubelet's identity: a client certificate for system:node:NAME in group system:nodes, with
  # the system:node role (the plane authorizes with RBAC only, no Node authorizer).
  local d="$nd/certs"
  openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$NODE_NAME" \
    -keyout "$d/kubelet.key" -out "$d/kubelet.csr" 2>/dev/null
  openssl x509 -req -in "$d/kubelet.csr" -CA "$run/certs/ca.crt" -CAkey "$run/certs/ca.key" -CAcreateserial -days 2 \
    -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$d/kubelet.crt" 2>/dev/null
  kubeconfig "$nd/kubelet.kubeconfig" "    client-certificate: $d/kubelet.crt
    client-key: $d/kubelet.key"
  kctl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-real-node}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:node:$NODE_NAME"}]
YAML
  cat >"$nd/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $P_KUBELET
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $P_KUBELET_HEALTHZ
containerRuntimeEndpoint: unix://$NODE_SOCK
# cgroup v1 machines (no systemd as init): the cgroupfs driver, no per-QoS hierarchy.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: ""
podCIDR: $NODE_POD_CIDR
podLogsDir: $nd/pod-logs
# Imported images cannot be pulled again: never collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $run/certs/ca.crt}
authorization: {mode: Webhook}
registerWithTaints:
- {key: e2e.trainguard.io/real-node, value: "true", effect: NoSchedule}
YAML
  start node-kubelet "$BIN/kubelet" --config "$nd/kubelet.yaml" --kubeconfig "$nd/kubelet.kubeconfig" \
    --root-dir "$nd/kubelet" --cert-dir "$nd/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --node-labels "type=real,e2e.trainguard.io/real-node=true" --v 2
  started node-kubelet "the kubelet's healthz" 60 curl -sf --max-time 5 "http://127.0.0.1:$P_KUBELET_HEALTHZ/healthz"
  wait_for "node $NODE_NAME Ready" 120 kctl wait --for condition=Ready --timeout=5s "node/$NODE_NAME" \
    || { log "--- last lines of $run/logs/node-kubelet.log ---"; tail -n 40 "$run/logs/node-kubelet.log" >&2; return 1; }
  start_node_services
  start_network_policies
  sed -i '/^NODE_/d; /^TRAINGUARD_IMAGE_REF=/d' "$run/env"
  cat >>"$run/env" <<ENV
NODE_NAME=$NODE_NAME
NODE_POD_CIDR=$NODE_POD_CIDR
NODE_IP=$NODE_IP
NODE_CONTAINERD_ADDRESS=$NODE_SOCK
NODE_UP_SECONDS=$((SECONDS - t0))
TRAINGUARD_IMAGE_REF=$image_ref
NODE_CLIENT_IMAGE_REF=docker.io/local/client:$(cat "$BIN/client.tag")
ENV
  log "node $NODE_NAME Ready in $((SECONDS - t0)) s (image ${image_ref:-none})"
}

# Services on the node, so that trainguard runs as shipped: the API server calls its webhook
# through the webhook Service (`service:` in the webhook configurations), and its pods reach the
# API server through the `kubernetes` Service.
# - kube-proxy (this Kubernetes build) in nftables mode: its own `kube-proxy` tables, nothing of the
#   host's rules touched, no conntrack sysctl changed. It translates Service addresses for the
#   host's own connections (the API server calling a webhook) and for the pods' (which reach the
#   host through their route to the Service range, see the CNI configuration).
# - The `kubernetes` Service: the API server binds 127.0.0.1 only, which pods cannot reach and an
#   EndpointSlice cannot hold (loopback addresses are refused), and the plane runs no endpoint
#   reconciler. So a relay (socat) listens on the bridge address at the API server's port and
#   forwards to loopback, and the node writes the Service's EndpointSlice with that address.
# - A second kube-controller-manager with what running Deployments takes (the deployment,
#   replicaset, endpointslice and disruption controllers), only while the node runs: the kwok
#   tests never meet a ReplicaSet's pods.
start_node_services() {
  local nd="$NODE_DIR" d="$NODE_DIR/certs"
  start node-apiserver-relay socat "TCP-LISTEN:$P_APISERVER,bind=$NODE_IP,fork,reuseaddr" "TCP:127.0.0.1:$P_APISERVER"
  started node-apiserver-relay "the API server relay on $NODE_IP" 30 curl -sf --max-time 5 --cacert "$run/certs/ca.crt" \
    --resolve "kubernetes:$P_APISERVER:$NODE_IP" --cert "$run/certs/admin.crt" --key "$run/certs/admin.key" \
    "https://kubernetes:$P_APISERVER/readyz"
  kctl apply -f - >/dev/null <<YAML
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes, endpointslice.kubernetes.io/managed-by: e2e.trainguard.io-plane}
addressType: IPv4
endpoints: [{addresses: ["$NODE_IP"], conditions: {ready: true}}]
ports: [{name: https, port: $P_APISERVER, protocol: TCP}]
YAML
  start node-kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$run/admin.kubeconfig" \
    --authentication-kubeconfig "$run/admin.kubeconfig" --authorization-kubeconfig "$run/admin.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$P_NODE_KCM" \
    --controllers deployment-controller,replicaset-controller,endpointslice-controller,disruption-controller
  started node-kube-controller-manager "the node's kube-controller-manager" 60 curl -sfk --max-time 5 "https://127.0.0.1:$P_NODE_KCM/healthz"
  # kube-proxy's identity: system:kube-proxy, which the bootstrap RBAC policy binds to the
  # system:node-proxier role.
  openssl req -newkey rsa:2048 -nodes -subj "/CN=system:kube-proxy" -keyout "$d/kube-proxy.key" -out "$d/kube-proxy.csr" 2>/dev/null
  openssl x509 -req -in "$d/kube-proxy.csr" -CA "$run/certs/ca.crt" -CAkey "$run/certs/ca.key" -CAcreateserial -days 2 \
    -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$d/kube-proxy.crt" 2>/dev/null
  kubeconfig "$nd/kube-proxy.kubeconfig" "    client-certificate: $d/kube-proxy.crt
    client-key: $d/kube-proxy.key"
  cat >"$nd/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $nd/kube-proxy.kubeconfig}
mode: nftables
hostnameOverride: $NODE_NAME
clusterCIDR: $NODE_POD_CIDR
detectLocalMode: ClusterCIDR
nodePortAddresses: ["$NODE_IP/32"]
healthzBindAddress: 127.0.0.1:$P_PROXY_HEALTHZ
metricsBindAddress: 127.0.0.1:$P_PROXY_METRICS
# Leave the host's conntrack settings as they are (0: do not set).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  start node-kube-proxy "$BIN/kube-proxy" --config "$nd/kube-proxy.yaml" --v 2
  started node-kube-proxy "kube-proxy's healthz" 60 curl -sf --max-time 5 "http://127.0.0.1:$P_PROXY_HEALTHZ/healthz"
  # The `kubernetes` Service through kube-proxy's rules, from the host as pods reach it.
  wait_for "the kubernetes Service at $SERVICE_APISERVER_IP:443" 60 curl -sf --max-time 5 --cacert "$run/certs/ca.crt" \
    --cert "$run/certs/admin.crt" --key "$run/certs/admin.key" "https://$SERVICE_APISERVER_IP/readyz" \
    || { log "--- last lines of $run/logs/node-kube-proxy.log ---"; tail -n 40 "$run/logs/node-kube-proxy.log" >&2; return 1; }
}

# NetworkPolicy on the node: kube-network-policies (its release's ClusterRole, binding and
# ServiceAccount, applied from its module's install.yaml) as a host process, as its DaemonSet runs
# it (host network, root), with a token of its ServiceAccount where in-cluster configuration looks
# for one (/var/run/secrets/kubernetes.io/serviceaccount, a path only its own mount namespace has)
# and the `kubernetes` Service as its API server address. It queues the first packet of each new
# connection to or from a pod on this node in its nftables table (inet kube-network-policies) and
# drops what the pod's policies do not allow; the node's own root processes (the kubelet's
# probes, the API server calling a webhook) it lets through by design. Not NRI (disabled in the
# node's containerd): pod addresses come from its pod informer. The bridge's traffic passes
# through these hooks because the kernel calls them for bridged packets
# (net.bridge.bridge-nf-call-iptables=1, checked, not set: it is the whole host's setting).
start_network_policies() {
  local sa="$NODE_DIR/network-policies/serviceaccount" dir secrets
  # shellcheck source=../../e2e/node-versions.env
  source "$root/e2e/node-versions.env"
  [[ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" == 1 ]] \
    || die "NetworkPolicy on the node's bridge needs net.bridge.bridge-nf-call-iptables=1 (br_netfilter): sysctl -w net.bridge.bridge-nf-call-iptables=1"
  can_unshare || die "kube-network-policies reads its token from a fixed path that only a private mount namespace gives it (root and unshare)"
  dir="$(cd "$run" && go mod download -json "sigs.k8s.io/kube-network-policies@$KUBE_NETWORK_POLICIES_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$dir/install.yaml" ]] || die "kube-network-policies' install.yaml not found in the module cache"
  python3 -c '
import sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] in ("ClusterRole", "ClusterRoleBinding", "ServiceAccount"):
        print("---"); yaml.safe_dump(d, sys.stdout)' <"$dir/install.yaml" | kctl apply -f - >/dev/null
  mkdir -p "$sa"
  kctl -n kube-system create token kube-network-policies --duration=48h >"$sa/token"
  cp "$run/certs/ca.crt" "$sa/ca.crt"
  echo kube-system >"$sa/namespace"
  # /var/run is /run on most systems: a tmpfs over it in the process's own mount namespace.
  secrets="$(readlink -f /var/run)"
  case "$run/ $BIN/" in "$secrets"/*|*" $secrets"/*) die "the run directory and binaries must not be under $secrets (hidden from kube-network-policies)" ;; esac
  start node-network-policies env KUBERNETES_SERVICE_HOST="$SERVICE_APISERVER_IP" KUBERNETES_SERVICE_PORT=443 \
    unshare -m --propagation private sh -c '
      set -e
      mount -t tmpfs -o size=1m tmpfs "$1"
      mkdir -p "$1/secrets/kubernetes.io/serviceaccount"
      mount --bind "$2" "$1/secrets/kubernetes.io/serviceaccount"
      shift 2
      exec "$@"' sh "$secrets" "$sa" \
    "$BIN/kube-network-policies" --hostname-override "$NODE_NAME" --disable-nri \
    --metrics-bind-address "127.0.0.1:$P_NETPOL_METRICS" --netfilter-bug-1766-fix=false --v 2
  started node-network-policies "kube-network-policies' nftables table" 60 \
    sh -c 'curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" >/dev/null && nft list table inet kube-network-policies >/dev/null' \
    sh "$P_NETPOL_METRICS"
}

stop_network_policies() {
  stop node-network-policies
  # It deletes its table when it stops; after a SIGKILL the table would stay and keep queueing
  # pod traffic to nobody.
  nft delete table inet kube-network-policies 2>/dev/null || true
}

stop_node_services() {
  stop node-kube-proxy
  # kube-proxy leaves its tables behind when stopped; they are its own (nftables mode), named so.
  local family
  for family in ip ip6; do nft delete table "$family" kube-proxy 2>/dev/null || true; done
  stop node-kube-controller-manager
  stop node-apiserver-relay
  kctl --request-timeout=15s -n default delete --ignore-not-found endpointslice/kubernetes >/dev/null 2>&1 || true
}

stop_node() {
  node_vars
  [[ -n "${BIN:-}" ]] || BIN="$(grep '^E2E_BIN=' "$run/env" 2>/dev/null | cut -d= -f2)"
  local nd="$NODE_DIR"
  # Its pods first, while the kubelet still runs to tear them down (short deadlines: a plane whose
  # API server is gone must still be cleaned up), then what is left in
  # containerd; then the kubelet and containerd, and every shim this containerd started (they
  # leave its process group: found by the socket they were given, unique to this run).
  if [[ -n "$(ours "$run/pids/node-kubelet" 2>/dev/null)" ]]; then
    kctl --request-timeout=15s delete pods --all-namespaces --field-selector "spec.nodeName=$NODE_NAME" --grace-period=1 --timeout=30s >/dev/null 2>&1 || true
  fi
  stop node-kubelet
  stop_network_policies
  stop_node_services
  if [[ -n "$(ours "$run/pids/node-containerd" 2>/dev/null)" ]]; then
    local id
    for id in $(nctr tasks ls -q 2>/dev/null); do nctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    sleep 1
    for id in $(nctr tasks ls -q 2>/dev/null); do nctr tasks delete -f "$id" >/dev/null 2>&1 || true; done
  fi
  stop node-containerd
  local f cmd
  for f in /proc/[0-9]*/cmdline; do
    cmd="$( { tr '\0' ' ' <"$f"; } 2>/dev/null)" || continue
    [[ $cmd == *containerd-shim-runc-v2* && $cmd == *" -address $NODE_SOCK "* ]] || continue
    f="${f#/proc/}"; kill -KILL "${f%/cmdline}" 2>/dev/null || true
  done
  # What the kubelet and containerd mounted (volumes, sandbox shm, rootfs, network namespaces),
  # deepest first.
  if [[ -d "$nd" ]]; then
    local m
    while read -r m; do umount -l "$m" 2>/dev/null || true; done \
      < <(findmnt -rn -o TARGET | awk -v p="$nd/" 'index($0, p) == 1' | sort -r)
  fi
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && ip link delete "$NODE_BRIDGE"
  # The kubelet links each container's log into the fixed /var/log/containers; a kubelet stopped
  # before its containers were removed leaves the links behind.
  [[ -d /var/log/containers ]] && find /var/log/containers -maxdepth 1 -lname "$nd/*" -delete 2>/dev/null
  kctl --request-timeout=15s delete --ignore-not-found "node/$NODE_NAME" clusterrolebinding/e2e-real-node >/dev/null 2>&1 || true
  # containerd's fixed shim socket directory, if this node left it empty.
  rmdir /run/containerd/s /run/containerd 2>/dev/null || true
  # The tests read the env file: no node there now.
  [[ -f "$run/env" ]] && sed -i '/^NODE_/d; /^TRAINGUARD_IMAGE_REF=/d' "$run/env"
  kctl --request-timeout=15s -n kube-system delete --ignore-not-found serviceaccount/kube-network-policies >/dev/null 2>&1 || true
  kctl --request-timeout=15s delete --ignore-not-found clusterrolebinding/kube-network-policies clusterrole/kube-network-policies >/dev/null 2>&1 || true
  return 0
}

down() {
  [[ -f "$run/pids/node-kubelet" || -f "$run/pids/node-containerd" || -f "$run/pids/node-kube-proxy" ]] && stop_node
  for name in trainguard-webhook trainguard-controller trainer jobset kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop "$name"
  done
  local extra
  for extra in "$run"/pids/*; do [[ -f "$extra" ]] && stop "$(basename "$extra")"; done
  if [[ -f "$run/env" ]]; then
    local data; data="$(grep '^ETCD_DATA=' "$run/env" | cut -d= -f2 || true)"
    [[ -n "$data" ]] && rm -rf "$data"
  fi
  return 0
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  stop) stop "trainguard-${2:?component}" ;;
  start) shift; start_trainguard "$@" ;;
  restore) restore_trainguard ;;
  kwok) case "${2:-}" in
      start) start_kwok "${3:?name}" "${4:?label selector}" "${5:-}" ;;
      stop) stop "kwok-${3:?name}" ;;
      *) die "usage: $0 kwok start NAME SELECTOR | kwok stop NAME" ;;
    esac ;;
  node) case "${2:-}" in
      start) start_node ;;
      stop) stop_node ;;
      *) die "usage: $0 node start|stop" ;;
    esac ;;
  training-operator) case "${2:-}" in
      start) start_training_operator "${3:-}" ;;
      stop) stop_training_operator ;;
      *) die "usage: $0 training-operator start [VERSION] | training-operator stop" ;;
    esac ;;
  kueue) case "${2:-}" in
      start) start_kueue ;;
      stop) stop_kueue ;;
      *) die "usage: $0 kueue start|stop" ;;
    esac ;;
  replica) case "${2:-}" in
      start) shift 2; start_controller_replica "$@" ;;
      stop) stop "${3:?name}" ;;
      kill) [[ -f "$run/pids/${3:?name}" ]] && { signal KILL "$run/pids/$3" || true; }; rm -f "$run/pids/$3" ;;
      *) die "usage: $0 replica start NAME ADMIN_PORT [ARGS] | replica stop|kill NAME" ;;
    esac ;;
  *) die "usage: $0 up | down | stop webhook|controller | start webhook|controller [ARGS...] | restore" ;;
esac
