#!/usr/bin/env bash
# The simulator's figures as one checksum per run, for checking that a speed change to crates/sim
# left them bit for bit as they were: every shipped workload (`--list-workloads`) x 8
# machine / placement / protocol configurations. Run it with the numaff binary of each build and
# compare the two outputs:
#   scripts/sim-figures.sh target/release/numaff > after.txt; diff before.txt after.txt
set -euo pipefail
numaff=${1:?usage: scripts/sim-figures.sh NUMAFF_BINARY}
# The list's rows: a name, then its program count.
workloads=$("$numaff" sim --list-workloads | awk 'NF > 2 && $2 ~ /^[0-9]+$/ { print $1 }')
[ -n "$workloads" ] || { echo "sim-figures: $numaff listed no workloads" >&2; exit 1; }
configs=(
  "laso-hpl os first-touch"
  "laso-hpl scatter interleave"
  "agung-xeon56 compact first-touch"
  "kmaf-opteron round-robin bind:0"
  "agung-knl4 random first-touch"
  "laso-lpl os interleave --coherence MOESI"
  "laso-hpl compact first-touch --huge-pages"
  "agung-xeon2 scatter first-touch --coherence MESI"
)
for w in $workloads; do
  for c in "${configs[@]}"; do
    read -r machine threads data extra <<<"$c"
    # shellcheck disable=SC2086 # $extra holds zero or more options
    sum=$("$numaff" sim --machine "$machine" --workload "$w" --threads "$threads" \
      --data "$data" $extra --json | md5sum | cut -c1-12)
    echo "$w $c $sum"
  done
done
