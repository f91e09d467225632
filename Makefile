# trainguard — see README.md. Every target works on a fresh clone.
CARGO ?= cargo
# kubectl, helm, actionlint, hadolint as scripts/install-test-deps.sh installs them.
TRAINGUARD_TOOLS ?= $(HOME)/.cache/trainguard-tools
export TRAINGUARD_TOOLS
export PATH := $(TRAINGUARD_TOOLS)/bin:$(PATH)

.PHONY: run test build lint fmt bench bench-scale e2e e2e-oldest e2e-cluster certs soak deploy oracle generate fuzz image

## run: the webhook on localhost with self-generated certificates, no cluster needed
## (dev profile; the first run builds the binary without the tests' dependency features)
run:
	$(CARGO) run --bin trainguard -- serve --dev

## test: build and run every test (no cluster, no network), the test kit's own included
## Builds only what runs: the library, the binary and the test binaries. The benches and examples
## are compiled (type-checked) by `make lint`'s clippy --all-targets; linking them here cost a
## third of the rebuild after a one-line change.
test:
	./scripts/install-test-deps.sh
	actionlint
	hadolint Dockerfile
	$(CARGO) nextest run --workspace --no-fail-fast --lib --bins --tests

## oracle: upstream's own code as the oracle (docs/ci.md, "The oracle"): one Go program per Trainer
## release (e2e/oracle/<tag>: the API server's CRD validation and Trainer's JobSet plugin) judges every
## admission fixture, every manifest under tests/data, each Trainer tag's own example TrainJobs and
## 10,000 generated cases per release (UPDATEs with JobSet state among them), and trainguard must agree; then `make generate` must leave the generated files unchanged. Needs Go;
## not part of `make test`. ORACLE_CASES sets the generated cases per release.
ORACLE_CASES ?= 10000
oracle:
	./scripts/oracle/build.sh
	TRAINGUARD_ORACLE_DIR="$${TRAINGUARD_ORACLE_DIR:-$${CARGO_TARGET_DIR:-$$PWD/target}/oracle}" \
		TRAINGUARD_ORACLE_CASES=$(ORACLE_CASES) \
		$(CARGO) test --features oracle --test oracle -- --nocapture
	./scripts/oracle/generate.sh
	git diff --exit-code -- e2e/oracle crates/core/src/trainer/crd crates/core/src/trainer/types
	@test -z "$$(git status --porcelain -- crates/core/src/trainer/crd crates/core/src/trainer/types)" || { echo "make generate wrote files git does not track:"; git status --porcelain -- crates/core/src/trainer/crd crates/core/src/trainer/types; exit 1; }

## generate: every generated file. The RBAC rules under deploy/ from the API-call table in
## src/rbac.rs (`cargo run --example gen_rbac` alone needs no Go); then every per-release file from
## upstream's Go modules, through each release's oracle (crates/core/src/trainer/crd/<tag>.json
## from each tag's CRD, types/<tag>.json from its Go types)
generate:
	$(CARGO) run --quiet --example gen_rbac
	./scripts/oracle/generate.sh

## bench: decision-path (Criterion), cache memory, end-to-end load and instructions per request vs a bare TLS baseline
bench:
	$(CARGO) bench --bench admission
	$(CARGO) bench --bench cache_memory
	$(CARGO) bench --bench controller
	$(CARGO) build --profile dist --bin trainguard --example baseline_server --example review_parts
	python3 benches/load.py
	python3 benches/instructions.py --payloads small,gated,denied,retimed,create,large,restamped --protocols http1,http2
	python3 benches/instructions.py --parts
	benches/validate.sh 1000 10000

## bench-scale: the controller (release binary, report mode) against a fake API server on loopback,
## 10k, 50k and 150k training pods: time to first plan, peak and steady RSS, event-to-plan latency
## under 200 pod updates/s (docs/benchmarks.md, Controller at scale)
bench-scale:
	$(CARGO) build --release --bin trainguard --example bench_scale
	set -e; dir="$${CARGO_TARGET_DIR:-target}"; \
	for size in "10000 1000" "50000 2500" "150000 5000"; do set -- $$size; \
		"$$dir/release/examples/bench_scale" --pods $$1 --nodes $$2 --churn 200 --churn-secs 30 \
			--binary "$$dir/release/trainguard" -- --webhook=false; \
	done

## certs: CA + serving certificate for the in-cluster Service into certs/ (see certs/README.md)
certs:
	$(CARGO) run --bin trainguard -- certs --service trainguard-webhook --namespace trainguard-system --out certs

## deploy: the ordered install into the current kubectl context (docs/operations.md, Install):
## checks the CRDs, applies all but the webhooks, waits for the Deployment, then the webhooks.
## make deploy IMAGE=REGISTRY/trainguard:TAG [OVERLAY=cert-manager|static-certs] [COMPONENTS=webhook-only]
IMAGE ?=
OVERLAY ?= cert-manager
COMPONENTS ?=
deploy:
	IMAGE='$(IMAGE)' OVERLAY='$(OVERLAY)' COMPONENTS='$(COMPONENTS)' ./scripts/deploy.sh

## fuzz: libFuzzer targets from the committed seeds, one after the other, FUZZ_SECONDS each (needs a
## nightly toolchain; installs cargo-fuzz; not part of make test). FUZZ_SANITIZER=none by default:
## the AddressSanitizer build (FUZZ_SANITIZER=address) takes far longer to build on 2 cores, and
## safe Rust needs it only around unsafe code; panics, overflows (debug assertions) and the
## targets' own checks are caught either way. The manifests target also reads tests/data as a
## read-only corpus (the first directory is where new inputs go).
FUZZ_SECONDS ?= 300
FUZZ_SANITIZER ?= none
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	mkdir -p fuzz/corpus/review fuzz/corpus/manifests
	cd fuzz && cargo +nightly fuzz run -s $(FUZZ_SANITIZER) review corpus/review seeds/review -- -dict=review.dict -max_len=16384 -timeout=5 -max_total_time=$(FUZZ_SECONDS)
	cd fuzz && cargo +nightly fuzz run -s $(FUZZ_SANITIZER) manifests corpus/manifests seeds/manifests regressions/manifests ../tests/data -- -dict=manifests.dict -max_len=65536 -timeout=10 -max_total_time=$(FUZZ_SECONDS)

## soak: two replicas under load for SOAK_MINUTES, certificates rotating, replicas restarted by SIGTERM
SOAK_MINUTES ?= 2
soak:
	$(CARGO) build --profile dist --bin trainguard
	python3 benches/soak.py --minutes $(SOAK_MINUTES)

## e2e: the local control plane from upstream's Go modules (etcd, kube-apiserver, controller-manager,
## scheduler, kwok, JobSet, Trainer; scripts/e2e/) with trainguard registered from deploy/, and the
## tests in tests/e2e against it. Needs Go; the first run builds the binaries (cached after that).
## trainguard is the build that ships (`--profile dist`, as the Dockerfile and the release build it);
## TRAINGUARD_BIN=target/debug/trainguard ./scripts/e2e/run.sh tries a debug build instead.
e2e:
	./scripts/install-test-deps.sh
	./scripts/e2e/install-deps.sh
	./scripts/e2e/run.sh

## e2e-oldest: the oldest supported Kubernetes minor (v1.32) on a plane of its own (its own run
## directory and ports, so it can run beside `make e2e`'s), with the tests of what differs by minor:
## the admission tests, the policies (not the MutatingAdmissionPolicy, which 1.32 does not serve),
## `validate` against the API server, node loss and the oracle's replay (docs/ci.md).
E2E_OLDEST_TESTS := test(/^(webhook|policy|validate|node_loss|oracle_replay)::/) and not test(/mutating_admission_policy/)
e2e-oldest:
	TRAINGUARD_E2E_KUBERNETES=v1.32 TRAINGUARD_E2E_RUN=/tmp/trainguard-e2e-v1.32 TRAINGUARD_E2E_PORT_BASE=25000 \
		TRAINGUARD_E2E_NODE=0 TRAINGUARD_E2E_TESTS='$(E2E_OLDEST_TESTS)' ./scripts/e2e/run.sh

## e2e-cluster: opt-in checks against the current kubectl context (Trainer and trainguard installed)
e2e-cluster:
	./scripts/e2e-cluster.sh

## image: the OCI image as the Dockerfile describes it, without a container engine or registry:
## the `--profile dist` binary on the Dockerfile's base assembled from its Debian packages, with
## the Dockerfile's user, entrypoint, command, ports and labels (scripts/image/build.sh; root, apt,
## umoci). Writes target/image/trainguard.oci.tar (`ctr images import`, `skopeo copy oci-archive:`).
image:
	$(CARGO) build --profile dist --bin trainguard
	./scripts/image/build.sh

## build: optimised binary in target/release (quick to build); `--profile dist` is what ships
build:
	$(CARGO) build --release

## lint: formatting, clippy with warnings as errors, the core crate's dependency tree kept pure (no
## tokio, hyper or clap), the fuzz targets type-checked on stable (no libFuzzer build), and
## licenses/bans/sources of the dependencies (`cargo fetch` first: cargo-deny reads the crates of
## every target, Windows and WASI ones too, which no build on this machine downloads)
lint:
	./scripts/install-lint-deps.sh
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --features e2e,oracle -- -D warnings
	./scripts/check-core-deps.sh
	$(CARGO) check --manifest-path fuzz/Cargo.toml --no-default-features --bins --quiet
	$(CARGO) fetch --locked --quiet
	$(CARGO) deny --offline check licenses bans sources

fmt:
	$(CARGO) fmt --all
