#!/bin/sh
# The overhead of `numaff profile` on a memory-bound C program: wall time with and without
# profiling, alternated over REPS repetitions in one run; prints each pair, the ratio of medians,
# and the median cpu time numaff itself used (its reader and trace writer; numaff prints it).
# Usage: scripts/profile-overhead.sh [NUMAFF] [REPS] [PASSES]   (use a release build of numaff)
# PROFILE_FLAGS adds options to `numaff profile`, e.g. PROFILE_FLAGS='--induce off' for the
# first-touch sampler alone (the default also induces faults, --induce auto).
set -eu
NUMAFF=${1:-target/debug/numaff}
REPS=${2:-5}
PASSES=${3:-8}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cc -O2 -pthread -o "$DIR/membound" crates/cli/tests/profile/membound.c
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
"$DIR/membound" "$PASSES" > /dev/null # warm up
i=0
while [ $i -lt "$REPS" ]; do
    t0=$(now); "$DIR/membound" "$PASSES" > /dev/null; t1=$(now)
    "$NUMAFF" profile ${PROFILE_FLAGS:-} -o "$DIR/t.parquet" -- "$DIR/membound" "$PASSES" > "$DIR/out" 2>/dev/null; t2=$(now)
    echo "$t0 $t1 $t2" | awk '{printf "plain %.3f s  profiled %.3f s\n", $2-$1, $3-$2}'
    echo "$t0 $t1 $t2" | awk '{print $2-$1, $3-$2}' >> "$DIR/times"
    sed -n "s/^numaff: \([0-9]*\) samples.*, \([0-9]*\) lost.*/\1 \2/p" "$DIR/out" >> "$DIR/counts"
    sed -n 's/.*cpu time: numaff \([0-9.]*\) s.*/\1/p' "$DIR/out" >> "$DIR/cpu"
    i=$((i + 1))
done
grep samples "$DIR/out"
awk '{s += $1; l += $2} END {printf "samples per run %.0f, lost per run %.0f (means)\n", s/NR, l/NR}' "$DIR/counts"
if [ -s "$DIR/cpu" ]; then
    echo "median cpu time of numaff itself: $(median < "$DIR/cpu") s"
fi
m1=$(awk '{print $1}' "$DIR/times" | median)
m2=$(awk '{print $2}' "$DIR/times" | median)
echo "$m1 $m2" | awk '{printf "median plain %.3f s, profiled %.3f s: overhead %+.1f %%\n", $1, $2, 100*($2/$1-1)}'
