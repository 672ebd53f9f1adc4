#!/usr/bin/env bash
# Fuzzes each target for SECONDS (default 60): scripts/fuzz.sh 3600 for a long run. The trace
# readers (trace_parquet, trace_csv) and the workload files (workload_file) get at most 30 s each,
# the perf script import (perf_script), mapping files (mapping_file), communication matrices
# (comm_matrix) and MApp's C input (c_source) 20 s in short runs (SECONDS <= 60), so that CI time
# stays bounded; FUZZ_SECONDS_<TARGET>=N (e.g. FUZZ_SECONDS_TRACE_CSV=5) sets one target's time.
# Uses a nightly toolchain when there is one, else stable with RUSTC_BOOTSTRAP (cargo-fuzz needs -Z).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
seconds=${1:-60}

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked --quiet
fi
toolchain=()
if rustup run nightly rustc --version >/dev/null 2>&1; then
  toolchain=(+nightly)
else
  export RUSTC_BOOTSTRAP=1
fi
targets=(machine_file hwloc_xml trace_parquet trace_csv perf_script workload_file mapping_file comm_matrix c_source)
for target in "${targets[@]}"; do mkdir -p "fuzz/corpus/$target"; done
cp machines/*.toml fuzz/corpus/machine_file/ 2>/dev/null || true
cp crates/machine/tests/fixtures/*.xml fuzz/corpus/hwloc_xml/ 2>/dev/null || true
cp crates/behave/tests/fixtures/*.parquet fuzz/corpus/trace_parquet/ 2>/dev/null || true
cp crates/behave/tests/fixtures/*.csv fuzz/corpus/trace_csv/ 2>/dev/null || true
cp crates/behave/tests/fixtures/perf-script-*.txt fuzz/corpus/perf_script/ 2>/dev/null || true
cp workloads/*.toml fuzz/corpus/workload_file/ 2>/dev/null || true
cp crates/policy/tests/fixtures/*.toml fuzz/corpus/mapping_file/ 2>/dev/null || true
cp crates/cli/tests/fixtures/*.csv fuzz/corpus/comm_matrix/ 2>/dev/null || true
cp crates/mapp/tests/c/*.c crates/cli/tests/fixtures/*.c fuzz/corpus/c_source/ 2>/dev/null || true
# Every target is built once, in one profile (release with debug assertions, cargo-fuzz's default).
# hwloc_xml needs no special build: numaff loads XML in a child process, so hwloc's own crashes and
# the C asserts of hwloc_topology_check (run by hwlocality under debug assertions) end the child and
# become errors, not fuzzer findings.
echo "fuzz: building the targets"
cargo "${toolchain[@]}" fuzz build >/dev/null 2>&1 || cargo "${toolchain[@]}" fuzz build
declare -A cap=([trace_parquet]=30 [trace_csv]=30 [perf_script]=20 [workload_file]=30
  [mapping_file]=20 [comm_matrix]=20 [c_source]=20)
for target in "${targets[@]}"; do
  secs=$seconds
  if [ -n "${cap[$target]:-}" ] && [ "$seconds" -le 60 ] && [ "$seconds" -gt "${cap[$target]}" ]; then
    secs=${cap[$target]}
  fi
  override="FUZZ_SECONDS_${target^^}"
  secs=${!override:-$secs}
  echo "fuzz: $target for ${secs}s"
  extra=()
  # -rss_limit_mb=0: no RSS watchdog thread, so the target stays single-threaded and numaff loads
  # the XML in a child process, as the numaff command does.
  [ "$target" = hwloc_xml ] && extra=(-rss_limit_mb=0)
  log=$(mktemp)
  if ! cargo "${toolchain[@]}" fuzz run "$target" "fuzz/corpus/$target" -- \
      -max_total_time="$secs" -max_len=65536 -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $target failed (a crash is kept under fuzz/artifacts/$target)"
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units|stat::new_units_added)" "$log" || tail -n 5 "$log"
  rm -f "$log"
done
