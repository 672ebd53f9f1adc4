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
echo "== cargo doc (warnings denied)"
# numaff-capi's lib and the CLI's bin are both named numaff (cargo#6313): the capi docs are left out.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --exclude numaff-capi --quiet
echo "== cargo test"
log=$(mktemp)
# Every QEMU guest the tests boot appends its boot+run seconds here (crates/testvm).
guest_times="${CARGO_TARGET_DIR:-target}/testvm/guest-times.log"
mkdir -p "$(dirname "$guest_times")" && : > "$guest_times"
test_rc=0
cargo test --workspace 2>&1 | tee "$log" || test_rc=$?
echo "== QEMU guests (boot+run seconds each)"
cat "$guest_times"
awk '/boot\+run [0-9.]+ s/ { for (i = 1; i <= NF; i++) if ($i == "boot+run") t += $(i+1); n++ } END { printf "%d guests, %.1f s in all\n", n, t }' "$guest_times"
[ "$test_rc" = 0 ] || { rm -f "$log"; echo "cargo test failed (exit $test_rc)" >&2; exit "$test_rc"; }
read -r passed failed < <(awk '/^test result:/ { for (i = 2; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } } END { print p + 0, f + 0 }' "$log")
rm -f "$log"
echo "== fuzzing (${FUZZ_SECONDS:-60} s per target)"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
echo
echo "tests: ${passed:-0} passed, ${failed:-0} failed"
