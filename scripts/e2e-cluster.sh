#!/usr/bin/env bash
# Opt-in end-to-end check against a real cluster: the current kubectl context must reach a
# cluster with Kubeflow Trainer (TrainJob CRD) installed and trainguard deployed
# (docs/operations.md). Nothing here runs in `make test`: the project machines have no cluster.
#
# It creates two TrainJobs in a scratch namespace, one suspended and one running, checks that
# server-side dry runs get the webhook's verdicts (an overrides change of the running one is
# denied by validate.trainjob.trainguard.io, rule U2; the same change while suspended and stopped
# is allowed; a managedBy change is denied — by Trainer's own CRD validation, which runs before
# any webhook, so trainguard's M1 is only a backstop there), and deletes the namespace.
set -euo pipefail

ns="trainguard-e2e-$$"
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }

kubectl version >/dev/null 2>&1 || fail "no cluster reachable with the current kubectl context"
kubectl get crd trainjobs.trainer.kubeflow.org >/dev/null 2>&1 || fail "TrainJob CRD not installed (install Kubeflow Trainer)"
kubectl get validatingwebhookconfiguration -o name | grep -q trainguard || fail "trainguard is not deployed (see docs/operations.md)"

kubectl create namespace "$ns" >/dev/null
trap 'kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT

for name in suspended running; do
  suspend=true; [ "$name" = running ] && suspend=false
  cat <<YAML | kubectl -n "$ns" apply -f - >/dev/null
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: $name
spec:
  suspend: $suspend
  runtimeRef:
    name: torch-distributed
YAML
done

field=$(kubectl get crd trainjobs.trainer.kubeflow.org -o json | grep -o '"runtimePatches"\|"podTemplateOverrides"\|"podSpecOverrides"' | head -1 | tr -d '"')
[ -n "$field" ] || fail "no known overrides field in the TrainJob CRD"
case "$field" in
  runtimePatches) patch='{"spec":{"runtimePatches":[{"manager":"e2e.trainguard.io/test","trainingRuntimeSpec":{}}]}}' ;;
  *) patch="{\"spec\":{\"$field\":[{\"targetJobs\":[{\"name\":\"node\"}]}]}}" ;;
esac

# A rule only trainguard decides: the overrides of a running TrainJob are frozen.
out=$(kubectl -n "$ns" patch trainjob running --type=merge --dry-run=server -p "$patch" 2>&1) \
  && fail "changing $field of a running TrainJob was allowed: $out"
echo "$out" | grep -q 'validate.trainjob.trainguard.io' || fail "$field change denied, but not by trainguard: $out"
echo "$out" | grep -q "spec.$field: Forbidden" || fail "$field change denied by trainguard without the U2 message: $out"
echo "e2e: $field change of a running TrainJob denied by trainguard"

kubectl -n "$ns" patch trainjob suspended --type=merge --dry-run=server -p "$patch" >/dev/null \
  || fail "changing $field of a suspended, never-started TrainJob was denied"
echo "e2e: $field change of a suspended TrainJob allowed"

# A suspend-only update never waits on trainguard (matchConditions); it must go through.
kubectl -n "$ns" patch trainjob running --type=merge --dry-run=server -p '{"spec":{"suspend":true}}' >/dev/null \
  || fail "suspending a running TrainJob was denied"
echo "e2e: suspend-only update allowed"

# Trainer's CRD already makes managedBy immutable; whoever refuses it, it must be refused.
out=$(kubectl -n "$ns" patch trainjob suspended --type=merge --dry-run=server \
  -p '{"spec":{"managedBy":"kueue.x-k8s.io/multikueue"}}' 2>&1) && fail "managedBy change was allowed: $out"
echo "e2e: managedBy change denied"
echo "e2e: ok"
