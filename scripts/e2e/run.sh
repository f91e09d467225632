#!/usr/bin/env bash
# `make e2e`: builds trainguard as it ships (`--profile dist`) and the upstream programs
# (cached); starts the local control plane, runs the tests in tests/e2e one at a time
# against it, and stops it. On failure the run directory with every process's log and the API
# server's audit log stays for inspection, and the tail of each log is printed. Needs Go (go1.26+)
# and the Go module proxy, python3 with PyYAML, openssl, curl.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
run="${TRAINGUARD_E2E_RUN:-/tmp/trainguard-e2e}"
export TRAINGUARD_E2E_RUN="$run"
target="${CARGO_TARGET_DIR:-$root/target}"

# TRAINGUARD_E2E_NODE=1: also a real node (kubelet, containerd, runc) running trainguard's image,
# assembled here from the binary under test as `make image` does (scripts/image/build.sh).
node="${TRAINGUARD_E2E_NODE:-0}"
# TRAINGUARD_E2E_TESTS: a nextest filter expression choosing the tests (default: all of them);
# `.ci/run` runs the oldest supported Kubernetes minor's set this way (docs/ci.md).
tests="${TRAINGUARD_E2E_TESTS:-all()}"
components=(kube jobset trainer kwok kueue training-operator "training-operator@v1.8.0")
[[ $node == 1 ]] && components+=(node)

# The binary that ships, then the upstream programs (cached): one after the other, as building
# them side by side on two cores was found no faster (docs/ci.md).
start=$SECONDS
if [[ -z "${TRAINGUARD_BIN:-}" ]]; then
  (cd "$root" && cargo build --profile dist --bin trainguard)
  echo "e2e: trainguard (dist) built in $((SECONDS - start)) s" >&2
fi
# The build that ships unless TRAINGUARD_BIN chooses another.
export TRAINGUARD_BIN="${TRAINGUARD_BIN:-$target/dist/trainguard}"
[[ -x "$TRAINGUARD_BIN" ]] || { echo "e2e: TRAINGUARD_BIN=$TRAINGUARD_BIN is not an executable" >&2; exit 1; }
start=$SECONDS
"$root/scripts/e2e/build.sh" "${components[@]}" >/dev/null
echo "e2e: upstream binaries ready in $((SECONDS - start)) s" >&2
if [[ $node == 1 ]]; then
  start=$SECONDS
  TRAINGUARD_IMAGE="$("$root/scripts/image/build.sh")"
  export TRAINGUARD_IMAGE
  echo "e2e: trainguard image ready in $((SECONDS - start)) s" >&2
fi

status=0
beside_pid=
stop_beside() { [[ -z $beside_pid ]] || kill -- -"$beside_pid" 2>/dev/null || true; }
trap 'stop_beside; "$root/scripts/e2e/plane.sh" down' EXIT
"$root/scripts/e2e/plane.sh" up >/dev/null || status=$?
if ((status == 0)) && [[ $node == 1 ]]; then
  "$root/scripts/e2e/plane.sh" node start || status=$?
fi
# TRAINGUARD_E2E_BESIDE: a command run in the background while the suite runs (`.ci/run` runs
# `make oracle` there: the tests mostly wait on upstream clocks, and the CPU is about 80% idle
# meanwhile, docs/ci.md). The tests that read what the oracle writes (the replay of its sample)
# run after it; its failure fails the run.
beside="${TRAINGUARD_E2E_BESIDE:-}"
after_beside='test(/^oracle_replay::/)'
# The real node's tests run after it too: they measure judged writes a second through a rolling
# upgrade, which on two cores filled by the beside command's builds says more about the builds.
[[ $node == 1 ]] && after_beside='test(/^(oracle_replay|installed|real_node)::/)'
if ((status == 0)); then
  # One at a time: the tests share one cluster, and some stop and restart trainguard.
  ignored=(); [[ $node == 1 ]] && ignored=(--run-ignored all)
  suite() { # filter [nextest args]: the chosen tests that also match the filter
    local filter="$1"; shift
    cargo nextest run --profile e2e --features e2e --test e2e "${ignored[@]}" -E "($tests) and ($filter)" "$@"
  }
  if [[ -n $beside ]]; then
    start=$SECONDS
    # Its own process group (setsid), so that an interrupted run stops all of it.
    (cd "$root" && exec setsid bash -c "$beside") >"$run/beside.log" 2>&1 &
    beside_pid=$!
    suite "not $after_beside" || status=$?
    beside_status=0
    wait "$beside_pid" || beside_status=$?
    beside_pid=
    cat "$run/beside.log"
    echo "e2e: '$beside' beside the suite exited $beside_status after $((SECONDS - start)) s" >&2
    ((beside_status == 0)) || status=$beside_status
    # A chosen set without the replay has nothing to run after.
    suite "$after_beside" --no-tests=pass || status=$?
  else
    suite "all()" || status=$?
  fi
fi
if ((status != 0)); then
  for f in "$run"/logs/*.log; do
    [[ $f == */audit.log ]] && continue
    echo "=== last lines of $f ===" >&2; tail -n 25 "$f" >&2
  done
  echo "e2e: FAILED; logs kept in $run/logs" >&2
fi
exit "$status"
