#!/usr/bin/env bash
# Runs the whole distlock test suite on a fresh machine: installs what the tests need through
# the system package manager when it is missing (redis-server and redis-cli for the private
# servers and clusters the tests start on free loopback ports — they never use a Redis that
# is already running — and openssl for the TLS test's certificates), then runs every test of
# the workspace but the 30 s soak (see the end).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} with the system package manager" >&2
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
  elif command -v dnf >/dev/null 2>&1; then
    # Fedora's redis package carries redis-cli.
    $sudo_cmd dnf install -y redis openssl
  elif command -v brew >/dev/null 2>&1; then
    brew install redis openssl
  else
    echo "please install redis-server and redis-cli (7.x) and openssl, then re-run" >&2
    exit 1
  fi
fi

# lock-tower without its default `axum` feature: path placeholders then need the layer's own
# routes (the workspace build below always has the feature, through the tests crate).
cargo test -p lock-tower --no-default-features --lib

# cargo-nextest, where installed, runs the test binaries side by side (the fault and cluster
# suites mostly wait on leases and failovers); plain `cargo test` runs them one after another.
# Either way every test of the workspace runs; nextest has no doc tests, so they run after.
# The 30 s soak is `#[ignore]`d: `cargo test -p distlock-tests --test faults -- --ignored`.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
  cargo test --workspace --doc
else
  cargo test --workspace "$@"
fi
