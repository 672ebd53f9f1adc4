#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy, the whole test suite, and a short fuzzing run of each
# fuzz target (FUZZ_SECONDS each, default 60). Assumes scripts/setup.sh has run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p numaff-machine --no-default-features --all-targets -- -D warnings
echo "== cargo test"
log=$(mktemp)
cargo test --workspace 2>&1 | tee "$log"
read -r passed failed < <(awk '/^test result:/ { for (i = 2; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } } END { print p + 0, f + 0 }' "$log")
rm -f "$log"
echo "== fuzzing (${FUZZ_SECONDS:-60} s per target)"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
echo
echo "tests: ${passed:-0} passed, ${failed:-0} failed"
