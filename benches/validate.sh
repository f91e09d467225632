#!/usr/bin/env bash
# Benchmark of `trainguard validate` over N TrainJob files (target: 10,000 files in under 2 s,
# --git-base included, memory flat in the number of files).
#
# Builds a temporary git repository with N TrainJob manifests (one per file, ~1 KiB each, in
# directories of 100), commits it as the base, then changes every 10th job's overrides while it
# stays suspended (allowed, with the offline warning) and moves every 100th job to another file.
# Times `validate --git-base HEAD~1 jobs` (wall clock and peak RSS, /usr/bin/time) for each N.
#
# Usage: benches/validate.sh [N...]          (default: 1000 5000 10000)
#        TRAINGUARD=path/to/trainguard benches/validate.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -z "${TRAINGUARD:-}" ]]; then
  cargo build --profile dist --quiet --bin trainguard
  TRAINGUARD="${CARGO_TARGET_DIR:-target}/dist/trainguard"
fi
TRAINGUARD="$(realpath "$TRAINGUARD")"
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1000 5000 10000)

# One TrainJob manifest; printf is a builtin, so writing 10,000 files forks nothing.
job() { # name suspend gpu
  printf '%s\n' \
    "apiVersion: trainer.kubeflow.org/v1alpha1" \
    "kind: TrainJob" \
    "metadata:" \
    "  name: $1" \
    "  namespace: ml-team" \
    "  labels:" \
    "    team: research" \
    "    app.kubernetes.io/part-of: bench" \
    "spec:" \
    "  suspend: $2" \
    "  runtimeRef:" \
    "    name: torch-distributed" \
    "  trainer:" \
    "    image: ghcr.io/example/train:v1" \
    "    command: [torchrun, train.py]" \
    "    numNodes: 4" \
    "    resourcesPerNode:" \
    "      requests:" \
    "        nvidia.com/gpu: 8" \
    "    env:" \
    "    - name: EPOCHS" \
    "      value: \"10\"" \
    "  podSpecOverrides:" \
    "  - targetJobs:" \
    "    - name: node" \
    "    nodeSelector:" \
    "      gpu: $3" \
    "    tolerations:" \
    "    - key: nvidia.com/gpu" \
    "      operator: Exists" \
    "      effect: NoSchedule"
}

printf '%-8s %-12s %-10s %-12s %s\n' files wall_s max_rss_MiB exit summary
for n in "${sizes[@]}"; do
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
  (
    cd "$dir"
    git init -q -b main
    git config user.email bench@example.com
    git config user.name bench
    for ((i = 0; i < n; i++)); do
      d="jobs/$((i / 100))"
      [[ -d "$d" ]] || mkdir -p "$d"
      job "job-$i" true a100 >"$d/job-$i.yaml"
    done
    git add -A && git commit -q -m base
    for ((i = 0; i < n; i += 10)); do
      job "job-$i" true h100 >"jobs/$((i / 100))/job-$i.yaml"
    done
    for ((i = 5; i < n; i += 100)); do
      mv "jobs/$((i / 100))/job-$i.yaml" "jobs/$((i / 100))/moved-$i.yaml"
    done
    git add -A && git commit -q -m change
  )
  out="$(cd "$dir" && /usr/bin/time -f '%e %M' -o "$dir/time" "$TRAINGUARD" validate --trainer-version v2.0 --quiet --git-base HEAD~1 jobs; echo "exit=$?")" || true
  read -r wall rss <"$dir/time"
  status="${out##*exit=}"
  printf '%-8s %-12s %-10s %-12s %s\n' "$n" "$wall" "$((rss / 1024))" "$status" "$(cd "$dir" && "$TRAINGUARD" validate --trainer-version v2.0 --git-base HEAD~1 jobs | tail -1)"
  rm -rf "$dir"
  trap - EXIT
done
