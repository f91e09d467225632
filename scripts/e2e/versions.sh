# Sourced by build.sh and plane.sh (with $root set, and $run for plane.sh's commands other than
# `up`): the upstream versions, e2e/versions.env, and the chosen Kubernetes minor's,
# e2e/kubernetes/<minor>.env (KUBERNETES_VERSION and the ETCD_VERSION its go.mod requires).
# The minor: TRAINGUARD_E2E_KUBERNETES (e.g. v1.37), else the one the plane in $run was started
# with (so a test's `plane.sh kueue start` builds and runs the same minor), else v1.37, the newest
# supported minor (docs/operations.md, "Kubernetes versions").
# shellcheck shell=bash
root="${root:?versions.sh needs root set}"
kubernetes_minor="${TRAINGUARD_E2E_KUBERNETES:-}"
if [[ -z $kubernetes_minor && -n ${run:-} ]]; then
  kubernetes_minor="$(sed -n 's/^KUBERNETES_MINOR=//p' "$run/env" 2>/dev/null || true)"
fi
kubernetes_minor="${kubernetes_minor:-v1.37}"
kubernetes_env="$root/e2e/kubernetes/$kubernetes_minor.env"
if [[ ! $kubernetes_minor =~ ^v1\.[0-9]+$ || ! -f $kubernetes_env ]]; then
  echo "e2e: TRAINGUARD_E2E_KUBERNETES=$kubernetes_minor names no e2e/kubernetes/$kubernetes_minor.env (there are: $(cd "$root/e2e/kubernetes" && printf '%s ' *.env | sed 's/\.env//g'))" >&2
  exit 2
fi
# shellcheck source=../../e2e/versions.env
source "$root/e2e/versions.env"
# shellcheck source=../../e2e/kubernetes/v1.37.env
source "$kubernetes_env"
[[ $KUBERNETES_VERSION == "$kubernetes_minor".* ]] \
  || { echo "e2e: $kubernetes_env sets KUBERNETES_VERSION=$KUBERNETES_VERSION, not a $kubernetes_minor release" >&2; exit 2; }
# build.sh, when plane.sh calls it, builds the same minor.
export TRAINGUARD_E2E_KUBERNETES="$kubernetes_minor"
