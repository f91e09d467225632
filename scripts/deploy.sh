#!/usr/bin/env bash
# `make deploy IMAGE=REGISTRY/trainguard:TAG [OVERLAY=cert-manager|static-certs] [COMPONENTS=...]`:
# the ordered install of docs/operations.md (Install) in one command, against the current
# kubectl context:
#   1. refuses the unpublished default image `trainguard:<version>` (no registry serves it);
#   2. checks that kubectl reaches a cluster (before blaming a missing CRD), the TrainJob CRD, and cert-manager's CRDs for the cert-manager overlay (certs/ for
#      static-certs), before anything is applied;
#   3. applies everything but the webhook configurations and waits for the webhook Deployment to
#      be Available (with failurePolicy Fail, a webhook registered before a replica is ready makes
#      every TrainJob write fail); the controller Deployment is not waited for: nothing needs it;
#   4. then applies the webhook configurations;
#   5. removes what an install from before the split into two Deployments left behind (the one
#      Deployment `trainguard`, its PodDisruptionBudget, ServiceAccount and ClusterRole), if any.
# COMPONENTS: space-separated kustomize components under deploy/components to add, e.g.
# `webhook-only` or `monitoring`. WAIT_TIMEOUT (default 5m) bounds step 3.
set -euo pipefail

IMAGE="${IMAGE:-}"
OVERLAY="${OVERLAY:-cert-manager}"
COMPONENTS="${COMPONENTS:-}"
WAIT_TIMEOUT="${WAIT_TIMEOUT:-5m}"
KUBECTL="${KUBECTL:-kubectl}"
NAMESPACE=trainguard-system
repo="$(cd "$(dirname "$0")/.." && pwd)"

fail() {
  echo "make deploy: $*" >&2
  exit 1
}

# 1. The image.
if [[ -z "$IMAGE" ]]; then
  fail "IMAGE is not set: push the image to a registry your nodes pull from and run
  make deploy IMAGE=REGISTRY/trainguard:TAG [OVERLAY=cert-manager|static-certs]
(the manifests' default image \`trainguard:TAG\` is not published anywhere; see docs/operations.md, Container image)"
fi
image_name="${IMAGE%%@*}"
digest=""
[[ "$IMAGE" == *@* ]] && digest="${IMAGE#*@}"
tag=""
last="${image_name##*/}"
if [[ "$last" == *:* ]]; then
  tag="${last##*:}"
  image_name="${image_name%:*}"
fi
if [[ "$image_name" != */* ]]; then
  fail "IMAGE=$IMAGE names no registry: the default image \`trainguard\` is not published anywhere, so the pods would never start (ImagePullBackOff) behind failurePolicy: Fail webhooks. Give the image you pushed, e.g. IMAGE=ghcr.io/OWNER/trainguard:0.2.0"
fi
[[ -n "$tag" || -n "$digest" ]] || fail "IMAGE=$IMAGE has no tag or digest; name the release, e.g. $IMAGE:0.2.0"

case "$OVERLAY" in
  cert-manager | static-certs) ;;
  *) fail "OVERLAY=$OVERLAY: use cert-manager or static-certs" ;;
esac
for c in $COMPONENTS; do
  [[ -f "$repo/deploy/components/$c/kustomization.yaml" ]] || fail "COMPONENTS: no deploy/components/$c"
  # Alone it leaves the controller with no grants on any namespace: the list and its RoleBindings
  # are the user's overlay (docs/controller.md, "Only some namespaces").
  [[ "$c" != controller-namespaces ]] || fail "COMPONENTS=controller-namespaces needs the namespaces and their RoleBindings, which only your own overlay can list: apply the overlay of docs/controller.md (\"Only some namespaces\") in the same order, or use the Helm chart's controller.namespaces"
done

# 2. Prerequisites, before anything is applied.
command -v "$KUBECTL" >/dev/null || fail "kubectl not found (KUBECTL=$KUBECTL)"
# A cluster first: without a context kubectl falls back to http://localhost:8080, which may be
# anything (`make run`'s admin port, for one), and every later check would blame the cluster.
context="$("$KUBECTL" config current-context 2>/dev/null)" ||
  fail "no cluster reachable: kubectl has no current context (no kubeconfig, or KUBECONFIG names none); point kubectl at the cluster first (kubectl config use-context NAME)"
version="$("$KUBECTL" get --raw /version --request-timeout=10s 2>&1)" || version=""
[[ "$version" == *'"gitVersion"'* ]] ||
  fail "no cluster reachable: kubectl context \"$context\" does not answer as a Kubernetes API server (kubectl get --raw /version: ${version:-no answer}); check the context and the network first"
"$KUBECTL" get crd trainjobs.trainer.kubeflow.org >/dev/null ||
  fail "the TrainJob CRD (trainjobs.trainer.kubeflow.org) is not installed: install Kubeflow Trainer first"
if [[ "$OVERLAY" == cert-manager ]]; then
  "$KUBECTL" get crd certificates.cert-manager.io issuers.cert-manager.io >/dev/null ||
    fail "cert-manager is not installed (no certificates.cert-manager.io/issuers.cert-manager.io CRD): install it first, or use OVERLAY=static-certs after make certs"
else
  [[ -f "$repo/certs/kustomization.yaml" ]] || fail "certs/ is empty: run make certs first (certs/README.md)"
fi

# The overlay with the image set, rendered once: both apply steps use the same objects.
# Inside deploy/ (git-ignored): kustomize takes only relative paths to bases and components.
work="$(mktemp -d "$repo/deploy/.make-deploy.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rel=..
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "  - $rel/overlays/$OVERLAY"
  if [[ -n "$COMPONENTS" ]]; then
    echo "components:"
    for c in $COMPONENTS; do echo "  - $rel/components/$c"; done
  fi
  echo "images:"
  echo "  - name: trainguard"
  echo "    newName: \"$image_name\""
  [[ -n "$tag" ]] && echo "    newTag: \"$tag\""
  [[ -n "$digest" ]] && echo "    digest: \"$digest\""
} >"$work/kustomization.yaml"
"$KUBECTL" kustomize "$work" >"$work/trainguard.yaml" || fail "rendering deploy/overlays/$OVERLAY failed"

# 3. Everything but the webhooks, then wait.
echo "make deploy: applying deploy/overlays/$OVERLAY without the webhook configurations (image $IMAGE)" >&2
"$KUBECTL" apply -f "$work/trainguard.yaml" -l 'trainguard.io/install-step!=webhooks'
echo "make deploy: waiting up to $WAIT_TIMEOUT for deploy/trainguard-webhook to be Available" >&2
if ! "$KUBECTL" -n "$NAMESPACE" wait deploy/trainguard-webhook --for=condition=Available --timeout="$WAIT_TIMEOUT"; then
  fail "deploy/trainguard-webhook did not become Available; the webhooks were NOT registered, so TrainJob writes are unaffected.
  kubectl -n $NAMESPACE get pods; kubectl -n $NAMESPACE describe pods   # ImagePullBackOff? certificate?
then run make deploy again (docs/operations.md, Troubleshooting)"
fi

# 4. The webhooks, last.
echo "make deploy: registering the webhooks" >&2
"$KUBECTL" apply -f "$work/trainguard.yaml"
# 5. The single Deployment of earlier versions (webhook and controller in one) kept serving
# until now; the new webhook pods are ready, so it can go.
echo "make deploy: removing the single-Deployment install of earlier versions, if any" >&2
"$KUBECTL" -n "$NAMESPACE" delete deployment/trainguard poddisruptionbudget/trainguard serviceaccount/trainguard --ignore-not-found
"$KUBECTL" delete clusterrolebinding/trainguard clusterrole/trainguard --ignore-not-found
echo "make deploy: done. Check: kubectl apply --dry-run=server -f my-trainjob.yaml" >&2
