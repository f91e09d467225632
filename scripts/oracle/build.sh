#!/usr/bin/env bash
# Builds the oracle of each Trainer release (e2e/oracle/<tag>, one Go module per tag) into
# $TRAINGUARD_ORACLE_DIR (default: $CARGO_TARGET_DIR/oracle, else target/oracle), next to a copy of
# the tag's TrainJob CRD taken from the module itself: oracle-<tag> and crd-<tag>.yaml. The tag's own
# example TrainJobs (every YAML file under the module's examples/ and docs/ with a `kind: TrainJob`
# document) go to examples-<tag>/, each named by its path in the module with `/` as `__`
# (examples/yaml/01-multi-node.yaml is examples-<tag>/examples__yaml__01-multi-node.yaml).
# Go's build cache makes a second run take seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${TRAINGUARD_ORACLE_DIR:-${CARGO_TARGET_DIR:-$PWD/target}/oracle}"
mkdir -p "$out"
command -v go >/dev/null || { echo "oracle: Go is needed (https://go.dev/dl/)" >&2; exit 2; }
# Built as scripts/e2e/build.sh builds the plane's programs (-trimpath, no cgo), so the packages an
# oracle shares with them come out of Go's build cache: the v2.3.0 oracle's module graph is
# Trainer v2.3.0's own, whose manager the plane runs, and v2.2.1's is the same graph with the
# v2.2.1 Trainer (docs/ci.md). A GOFLAGS from the caller is kept.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -trimpath"
export CGO_ENABLED=0
for dir in e2e/oracle/v*/; do
	tag="$(basename "$dir")"
	start=$(date +%s)
	(cd "$dir" && go build -o "$out/oracle-$tag" .)
	module_dir="$(cd "$dir" && go list -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2)"
	install -m 0644 "$module_dir/manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml" "$out/crd-$tag.yaml"
	rm -rf "$out/examples-$tag"
	mkdir -p "$out/examples-$tag"
	for top in examples docs; do
		[ -d "$module_dir/$top" ] || continue
		(cd "$module_dir" && find "$top" -type f \( -name '*.yaml' -o -name '*.yml' \) | sort) | while read -r rel; do
			if grep -qE "^[[:space:]]*kind:[[:space:]]*[\"']?TrainJob[\"']?[[:space:]]*(#.*)?$" "$module_dir/$rel"; then
				install -m 0644 "$module_dir/$rel" "$out/examples-$tag/${rel//\//__}"
			fi
		done
	done
	examples=$(find "$out/examples-$tag" -type f | wc -l)
	echo "oracle $tag: built in $(($(date +%s) - start)) s, $examples example files"
done
