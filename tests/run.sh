#!/usr/bin/env bash
# Runs the whole distlock test suite on a fresh machine: installs redis-server through the
# system package manager when it is missing (the tests start their own private servers on
# free loopback ports; they never use a Redis that is already running), then runs every
# test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found: installing it with the system package manager" >&2
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq redis-server
  elif command -v dnf >/dev/null 2>&1; then
    $sudo_cmd dnf install -y redis
  elif command -v brew >/dev/null 2>&1; then
    brew install redis
  else
    echo "please install redis-server (7.x) and re-run" >&2
    exit 1
  fi
fi

cargo test --workspace "$@"
