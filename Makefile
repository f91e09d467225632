# trainguard — see README.md. Every target works on a fresh clone.
CARGO ?= cargo

.PHONY: run test build lint fmt bench e2e certs soak

## run: the webhook on localhost with self-generated certificates, no cluster needed
run:
	$(CARGO) run --release -- serve --dev

## test: build and run every test (no cluster, no network)
test:
	./scripts/install-test-deps.sh
	$(CARGO) build --all-targets
	$(CARGO) nextest run --no-fail-fast

build:
	$(CARGO) build --release

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all
