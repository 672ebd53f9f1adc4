#!/usr/bin/env bash
# The simulator's figures as one checksum per run, for checking that a speed change to crates/sim
# left them bit for bit as they were (issue 4): 18 workloads x 8 machine / placement / protocol
# configurations. Run it with the numaff binary of each build and compare the two outputs:
#   scripts/sim-figures.sh target/release/numaff > after.txt; diff before.txt after.txt
set -euo pipefail
numaff=${1:?usage: scripts/sim-figures.sh NUMAFF_BINARY}
workloads="nas-bt nas-cg nas-dc nas-ep nas-ft nas-is nas-lu nas-mg nas-sp nas-ua
  parsec-streamcluster parsec-canneal parsec-dedup parsec-ferret parsec-facesim
  parsec-fluidanimate parsec-x264 mix-queue"
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
