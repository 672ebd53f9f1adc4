#!/bin/sh
# The overhead of `numaff profile` on a memory-bound C program, measured side by side: each
# repetition starts at once the plain program, the program under `numaff profile` (its defaults:
# first-touch sampling, induced faults within --induce-budget) and under `numaff profile --induce
# off`. Each program prints when it has done its PASSES and streams on until all three have, so
# the three share the cpus and the memory bandwidth alike until the slowest is done, and the
# machine's noise (other VMs' memory traffic: ±30 % between runs made one after the other here)
# falls on all of them. Prints, per repetition, each one's wall time from the common start to its
# DONE and the ratios to the plain one; then the medians. The launch order rotates.
# Usage: scripts/profile-overhead-side.sh [NUMAFF] [REPS] [PASSES]   (a release build of numaff)
set -eu
NUMAFF=${1:-target/release/numaff}
REPS=${2:-5}
PASSES=${3:-128}
DIR=$(mktemp -d)
trap 'touch "$DIR/stop"; wait; rm -rf "$DIR"' EXIT
cc -O2 -pthread -o "$DIR/membound" crates/cli/tests/profile/membound.c
now() { date +%s.%N; }
done_at() { sed -n 's/^DONE //p' "$DIR/out.$1" 2>/dev/null; }
start() {
    case $1 in
    plain) "$DIR/membound" "$PASSES" "$DIR/stop" > "$DIR/out.plain" & ;;
    default) "$NUMAFF" profile -o "$DIR/default.parquet" -- "$DIR/membound" "$PASSES" "$DIR/stop" \
        > "$DIR/out.default" 2>&1 & ;;
    off) "$NUMAFF" profile --induce off -o "$DIR/off.parquet" -- "$DIR/membound" "$PASSES" \
        "$DIR/stop" > "$DIR/out.off" 2>&1 & ;;
    esac
}
i=0
while [ "$i" -lt "$REPS" ]; do
    rm -f "$DIR/stop" "$DIR"/out.*
    case $((i % 3)) in
    0) order="plain default off" ;;
    1) order="default off plain" ;;
    *) order="off plain default" ;;
    esac
    t0=$(now)
    for w in $order; do start "$w"; done
    while [ -z "$(done_at plain)" ] || [ -z "$(done_at default)" ] || [ -z "$(done_at off)" ]; do
        sleep 0.05
    done
    touch "$DIR/stop"
    wait
    p=$(done_at plain); d=$(done_at default); o=$(done_at off)
    cpu=$(sed -n 's/.*cpu time: numaff \([0-9.]*\) s.*/\1/p' "$DIR/out.default")
    induced=$(sed -n 's/^numaff: induced faults: \(.*agent[^:]*\): .*/\1/p' "$DIR/out.default")
    echo "$t0 $p $d $o" | awk -v cpu="$cpu" '{printf "plain %.3f s  default %.3f s (%+.2f %%)  --induce off %.3f s (%+.2f %%)  numaff cpu %s s\n", $2-$1, $3-$1, 100*(($3-$1)/($2-$1)-1), $4-$1, 100*(($4-$1)/($2-$1)-1), cpu}'
    echo "$t0 $p $d $o" | awk '{print 100*(($3-$1)/($2-$1)-1), 100*(($4-$1)/($2-$1)-1)}' >> "$DIR/pct"
    [ -n "$induced" ] && grep -o 'induced faults: uffd agent on.*' "$DIR/out.default" | cut -c1-200
    i=$((i + 1))
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median over $REPS repetitions: default $(awk '{print $1}' "$DIR/pct" | median) %, --induce off $(awk '{print $2}' "$DIR/pct" | median) %"
