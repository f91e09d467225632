#!/usr/bin/env bash
# Builds the oracle of each Trainer release (e2e/oracle/<tag>, one Go module per tag) into
# $TRAINGUARD_ORACLE_DIR (default: $CARGO_TARGET_DIR/oracle, else target/oracle), next to a copy of
# the tag's TrainJob CRD taken from the module itself: oracle-<tag> and crd-<tag>.yaml.
# Go's build cache makes a second run take seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${TRAINGUARD_ORACLE_DIR:-${CARGO_TARGET_DIR:-$PWD/target}/oracle}"
mkdir -p "$out"
command -v go >/dev/null || { echo "oracle: Go is needed (https://go.dev/dl/)" >&2; exit 2; }
for dir in e2e/oracle/v*/; do
	tag="$(basename "$dir")"
	start=$(date +%s)
	(cd "$dir" && go build -o "$out/oracle-$tag" .)
	module_dir="$(cd "$dir" && go list -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2)"
	install -m 0644 "$module_dir/manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml" "$out/crd-$tag.yaml"
	echo "oracle $tag: built in $(($(date +%s) - start)) s"
done
