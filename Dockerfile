# syntax=docker/dockerfile:1
# trainguard image: build with the Rust toolchain, run as non-root on distroless.
#   docker build --build-arg TRAINGUARD_GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t REGISTRY/trainguard:0.2.0 .
# Built and pushed for linux/amd64 and linux/arm64 by .github/workflows/release.yml; `make test`
# lints it with hadolint (no container engine on the development machines).

ARG RUST_VERSION=1.89

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Manifests and sources only (see .dockerignore): the binary in src/, the workspace members in
# crates/ (the pure core, the test kits: cargo loads every member); benches/ because Cargo.toml
# declares a bench.
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY crates ./crates
COPY benches ./benches
# No .git in the build context: the release workflow passes the commit for `--version`.
ARG TRAINGUARD_GIT_COMMIT=unknown
ENV TRAINGUARD_GIT_COMMIT=${TRAINGUARD_GIT_COMMIT}
# The repository `validate -o sarif` names as its informationUri (empty: none).
ARG TRAINGUARD_REPOSITORY_URL=
ENV TRAINGUARD_REPOSITORY_URL=${TRAINGUARD_REPOSITORY_URL}
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked --bin trainguard \
    && install -D -m 0755 target/dist/trainguard /out/trainguard

# glibc + libgcc, no shell, no package manager; "nonroot" runs as uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="trainguard" \
      org.opencontainers.image.description="Admission webhook and companion controller for Kubeflow training workloads" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/trainguard /usr/local/bin/trainguard
USER 65532:65532
# 9443: HTTPS webhook; 8080: admin (/healthz, /readyz, /metrics).
EXPOSE 9443 8080
ENTRYPOINT ["/usr/local/bin/trainguard"]
CMD ["serve"]
