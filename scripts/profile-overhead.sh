#!/bin/sh
# The overhead of `numaff profile` on a memory-bound C program: wall time with and without
# profiling, alternated over REPS repetitions in one run; prints each pair and the ratio of medians.
# Usage: scripts/profile-overhead.sh [NUMAFF] [REPS] [PASSES]
set -eu
NUMAFF=${1:-target/debug/numaff}
REPS=${2:-5}
PASSES=${3:-8}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cc -O2 -pthread -o "$DIR/membound" crates/cli/tests/profile/membound.c
now() { date +%s.%N; }
"$DIR/membound" "$PASSES" > /dev/null # warm up
i=0
while [ $i -lt "$REPS" ]; do
    t0=$(now); "$DIR/membound" "$PASSES" > /dev/null; t1=$(now)
    "$NUMAFF" profile -o "$DIR/t.parquet" -- "$DIR/membound" "$PASSES" > "$DIR/out" 2>/dev/null; t2=$(now)
    echo "$t0 $t1 $t2" | awk '{printf "plain %.3f s  profiled %.3f s\n", $2-$1, $3-$2}'
    echo "$t0 $t1 $t2" | awk '{print $2-$1, $3-$2}' >> "$DIR/times"
    i=$((i + 1))
done
grep samples "$DIR/out"
sort -n -k1 "$DIR/times" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' > "$DIR/m1"
sort -n -k2 "$DIR/times" | awk '{a[NR]=$2} END {print a[int((NR+1)/2)]}' > "$DIR/m2"
paste "$DIR/m1" "$DIR/m2" | awk '{printf "median plain %.3f s, profiled %.3f s: overhead %+.1f %%\n", $1, $2, 100*($2/$1-1)}'
