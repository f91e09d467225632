#!/usr/bin/env bash
# `make generate`: writes every per-release file from upstream's modules, through each release's
# own oracle (scripts/oracle/build.sh builds them):
#   crates/core/src/trainer/crd/<tag>.json   the tag's TrainJob CRD schema (`oracle schema`),
#                                            which `validate`'s schema check applies
#   crates/core/src/trainer/types/<tag>.json the tag's TrainJobSpec Go types, with the Kubernetes
#                                            core types of the tag's own k8s.io/api, pruned to
#                                            the CRD (`oracle types`): the model Trainer's
#                                            equality is computed on
# CI runs it and fails on any difference from the committed files (`make oracle`).
set -euo pipefail
cd "$(dirname "$0")/../.."
./scripts/oracle/build.sh
out="${TRAINGUARD_ORACLE_DIR:-${CARGO_TARGET_DIR:-$PWD/target}/oracle}"
mkdir -p crates/core/src/trainer/crd crates/core/src/trainer/types
for dir in e2e/oracle/v*/; do
	tag="$(basename "$dir")"
	"$out/oracle-$tag" schema "$out/crd-$tag.yaml" >"crates/core/src/trainer/crd/$tag.json"
	"$out/oracle-$tag" types "$out/crd-$tag.yaml" >"crates/core/src/trainer/types/$tag.json"
done
