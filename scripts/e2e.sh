#!/usr/bin/env bash
# Opt-in end-to-end check against a real cluster: the current kubectl context must reach a
# cluster with Kubeflow Trainer (TrainJob CRD) installed and trainguard deployed
# (docs/operations.md). Nothing here runs in `make test`: the project machines have no cluster.
#
# It creates a suspended TrainJob in a scratch namespace, checks that server-side dry runs get
# the webhook's verdicts (a managedBy change is denied by validate.trainjob.trainguard.io; an
# overrides change while suspended and stopped is allowed), and deletes the namespace.
set -euo pipefail

ns="trainguard-e2e-$$"
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }

kubectl version >/dev/null 2>&1 || fail "no cluster reachable with the current kubectl context"
kubectl get crd trainjobs.trainer.kubeflow.org >/dev/null 2>&1 || fail "TrainJob CRD not installed (install Kubeflow Trainer)"
kubectl get validatingwebhookconfiguration -o name | grep -q trainguard || fail "trainguard is not deployed (see docs/operations.md)"

kubectl create namespace "$ns" >/dev/null
trap 'kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true' EXIT

cat <<YAML | kubectl -n "$ns" apply -f - >/dev/null
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: e2e
spec:
  suspend: true
  runtimeRef:
    name: torch-distributed
YAML

out=$(kubectl -n "$ns" patch trainjob e2e --type=merge --dry-run=server \
  -p '{"spec":{"managedBy":"kueue.x-k8s.io/multikueue"}}' 2>&1) && fail "managedBy change was allowed: $out"
echo "$out" | grep -q 'validate.trainjob.trainguard.io' || fail "managedBy change denied, but not by trainguard: $out"
echo "e2e: managedBy change denied by trainguard"

field=$(kubectl get crd trainjobs.trainer.kubeflow.org -o json | grep -o '"runtimePatches"\|"podTemplateOverrides"\|"podSpecOverrides"' | head -1 | tr -d '"')
[ -n "$field" ] || fail "no known overrides field in the TrainJob CRD"
case "$field" in
  runtimePatches) patch='{"spec":{"runtimePatches":[{"manager":"e2e.trainguard.io/test","trainingRuntimeSpec":{}}]}}' ;;
  *) patch="{\"spec\":{\"$field\":[{\"targetJobs\":[{\"name\":\"node\"}]}]}}" ;;
esac
kubectl -n "$ns" patch trainjob e2e --type=merge --dry-run=server -p "$patch" >/dev/null \
  || fail "changing $field of a suspended, never-started TrainJob was denied"
echo "e2e: $field change of a suspended TrainJob allowed"
echo "e2e: ok"
