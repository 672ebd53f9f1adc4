#!/usr/bin/env bash
# Fuzzes each target for SECONDS (default 60): scripts/fuzz.sh 3600 for a long run. The trace
# readers (trace_parquet, trace_csv), the workload files (workload_file), the trace analysis
# (trace_analysis), sysfs trees (sysfs_tree) and the simulator on machine files (sim_machine) get at
# most 30 s each, the perf script import (perf_script), mapping files (mapping_file), communication
# matrices (comm_matrix), MApp's C input (c_source), synthetic machine descriptions
# (machine_synthetic), the /proc parsers (proc_files) and trace replay in the simulator (sim_trace)
# 20 s in short runs (SECONDS <= 60), so that CI time stays bounded; FUZZ_SECONDS_<TARGET>=N
# (e.g. FUZZ_SECONDS_TRACE_CSV=5) sets one target's time. Each target's corpus starts from its seeds: the repository's fixtures, or fuzz/seeds/TARGET.
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
targets=(machine_file hwloc_xml trace_parquet trace_csv perf_script workload_file mapping_file
  comm_matrix c_source machine_synthetic sysfs_tree proc_files trace_analysis sim_machine sim_trace)
# Where each target's seeds are, one place per target.
declare -A seeds=(
  [machine_file]="machines/*.toml"
  [hwloc_xml]="crates/machine/tests/fixtures/*.xml"
  [trace_parquet]="crates/behave/tests/fixtures/*.parquet"
  [trace_csv]="crates/behave/tests/fixtures/*.csv"
  [perf_script]="crates/behave/tests/fixtures/perf-script-*.txt"
  [workload_file]="workloads/*.toml"
  [mapping_file]="crates/policy/tests/fixtures/*.toml"
  [comm_matrix]="crates/cli/tests/fixtures/*.csv"
  [c_source]="crates/mapp/tests/c/*.c crates/cli/tests/fixtures/*.c"
  [sim_trace]="fuzz/seeds/trace_analysis/*"
)
for target in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$target"
  # shellcheck disable=SC2086 # the globs expand here
  cp ${seeds[$target]:-fuzz/seeds/$target/*} "fuzz/corpus/$target/" 2>/dev/null || true
done
# Every target is built once, in one profile (release with debug assertions, cargo-fuzz's default).
# hwloc_xml needs no special build: numaff loads XML in a child process, so hwloc's own crashes and
# the C asserts of hwloc_topology_check (run by hwlocality under debug assertions) end the child and
# become errors, not fuzzer findings.
echo "fuzz: building the targets"
cargo "${toolchain[@]}" fuzz build >/dev/null 2>&1 || cargo "${toolchain[@]}" fuzz build
declare -A cap=([trace_parquet]=30 [trace_csv]=30 [perf_script]=20 [workload_file]=30
  [mapping_file]=20 [comm_matrix]=20 [c_source]=20 [machine_synthetic]=20 [sysfs_tree]=30
  [proc_files]=20 [trace_analysis]=30 [sim_machine]=30 [sim_trace]=20)
for target in "${targets[@]}"; do
  secs=$seconds
  if [ -n "${cap[$target]:-}" ] && [ "$seconds" -le 60 ] && [ "$seconds" -gt "${cap[$target]}" ]; then
    secs=${cap[$target]}
  fi
  override="FUZZ_SECONDS_${target^^}"
  secs=${!override:-$secs}
  echo "fuzz: $target for ${secs}s"
  extra=()
  # -timeout=30: an input that runs 30 s is a finding (libFuzzer's default waits 20 minutes).
  # -rss_limit_mb=0: no RSS watchdog thread, so the target stays single-threaded and numaff loads
  # the XML in a child process, as the numaff command does.
  [ "$target" = hwloc_xml ] && extra=(-rss_limit_mb=0)
  log=$(mktemp)
  if ! cargo "${toolchain[@]}" fuzz run "$target" "fuzz/corpus/$target" -- \
      -max_total_time="$secs" -timeout=30 -max_len=65536 -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $target failed (a crash is kept under fuzz/artifacts/$target)"
    exit 1
  fi
  grep -E "^(Done|stat::number_of_executed_units|stat::new_units_added)" "$log" || tail -n 5 "$log"
  rm -f "$log"
done
