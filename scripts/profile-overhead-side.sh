#!/bin/sh
# The wall-time overhead of `numaff profile` on a memory-bound C program, measured side by side:
# each repetition starts at once the plain program pinned to one cpu and the profiled one (with
# numaff's agent inside it) pinned to the other, one thread each, and swaps the cpus every
# repetition. Each prints DONE after its PASSES and streams on until both have, so both see the
# same memory bandwidth, and the noise of a shared host falls on both alike. numaff itself is not pinned, so its cpu time may come
# from either program: "charged" adds all it spent before the program exited (its cpu time less
# its finish) to the profiled one, an upper bound. "finish" is numaff's wall time after the
# program exited: writing the trace and reaping the program; it does not delay the program. Prints per repetition
# the wall times from the common start to each DONE, the ratio, the charged ratio and the finish;
# then the medians and quartiles.
# Usage: scripts/profile-overhead-side.sh [NUMAFF] [REPS] [PASSES]   (a release build of numaff)
# PROFILE_FLAGS adds options to `numaff profile` (e.g. '--induce off'); CPUS="A B" picks the cpus.
# CALIBRATE=US runs, instead of numaff, the program with US microseconds of cpu-only work added to
# each pass: a known overhead, to see what this measurement reports for it (memory-bound programs
# side by side share the memory bandwidth, which can hide part of a slowdown).
set -eu
NUMAFF=${1:-target/release/numaff}
REPS=${2:-10} # even: half with the profiled program on each cpu
PASSES=${3:-128}
set -- ${CPUS:-0 1}
CPU_A=$1
CPU_B=$2
DIR=$(mktemp -d)
trap 'touch "$DIR/stop"; wait; rm -rf "$DIR"' EXIT
cc -O2 -pthread -o "$DIR/membound" crates/cli/tests/profile/membound.c
now() { date +%s.%N; }
field() { sed -n "s/^$1 //p" "$2" 2>/dev/null; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
quartiles() { sort -n | awk '{a[NR]=$1} END {printf "%s .. %s", a[int((NR+3)/4)], a[int((3*NR+1)/4)]}'; }
i=0
while [ "$i" -lt "$REPS" ]; do
    rm -f "$DIR/stop" "$DIR"/out.* "$DIR/end"
    if [ $((i % 2)) -eq 0 ]; then plain_cpu=$CPU_A prof_cpu=$CPU_B; else plain_cpu=$CPU_B prof_cpu=$CPU_A; fi
    t0=$(now)
    taskset -c "$plain_cpu" "$DIR/membound" "$PASSES" "$DIR/stop" 1 > "$DIR/out.plain" &
    if [ -n "${CALIBRATE:-}" ]; then
        ( taskset -c "$prof_cpu" "$DIR/membound" "$PASSES" "$DIR/stop" 1 "$CALIBRATE" > "$DIR/out.prof"
          echo "numaff: cpu time: numaff 0 s" >> "$DIR/out.prof"; now > "$DIR/end" ) &
    else
        ( "$NUMAFF" profile ${PROFILE_FLAGS:-} -o "$DIR/t.parquet" -- taskset -c "$prof_cpu" \
            "$DIR/membound" "$PASSES" "$DIR/stop" 1 > "$DIR/out.prof" 2>&1; now > "$DIR/end" ) &
    fi
    while [ -z "$(field DONE "$DIR/out.plain")" ] || [ -z "$(field DONE "$DIR/out.prof")" ]; do
        if [ -e "$DIR/end" ]; then cat "$DIR/out.prof" >&2; echo "numaff ended early" >&2; exit 1; fi
        sleep 0.05
    done
    touch "$DIR/stop"
    wait
    p=$(field DONE "$DIR/out.plain"); d=$(field DONE "$DIR/out.prof")
    finish=$(echo "$(cat "$DIR/end") $(field EXIT "$DIR/out.prof")" | awk '{print $1 - $2}')
    cpu=$(sed -n 's/.*cpu time: numaff \([0-9.]*\) s.*/\1/p' "$DIR/out.prof")
    # $6: numaff's cpu before the program exited (its cpu less its finish, at least 0).
    echo "$t0 $p $d $finish $cpu" | awk -v a="$plain_cpu" -v b="$prof_cpu" '{
        run = $5 - $4; if (run < 0) run = 0
        printf "plain (cpu %s) %.3f s  profiled (cpu %s) %.3f s  %+.2f %%  charged %+.2f %%  numaff cpu %.3f s  finish %.3f s\n",
            a, $2-$1, b, $3-$1, 100*(($3-$1)/($2-$1)-1), 100*(($3-$1+run)/($2-$1)-1), $5, $4 }'
    echo "$t0 $p $d $finish $cpu" | awk '{run = $5 - $4; if (run < 0) run = 0
        print 100*(($3-$1)/($2-$1)-1), 100*(($3-$1+run)/($2-$1)-1), 100*(($3-$1+run+$4)/($2-$1)-1)}' >> "$DIR/pct"
    i=$((i + 1))
done
grep -E '^numaff: [0-9]+ samples|induced faults: uffd agent on|limited' "$DIR/out.prof" | cut -c1-200 || true
if [ -n "${CALIBRATE:-}" ]; then what="no numaff, $CALIBRATE µs of cpu-only work per pass"; else what="profiled ${PROFILE_FLAGS:-(defaults)}"; fi
echo "over $REPS repetitions, PASSES $PASSES, $what:"
# The two cpus differ (one takes more interrupts): each pair of repetitions, one per side, is
# averaged before the median.
pairs() { awk -v k="$1" 'NR % 2 == 1 {a = $k} NR % 2 == 0 {print (a + $k) / 2}' "$DIR/pct"; }
for c in "1 at the program's DONE" "2 charged numaff's cpu" "3 charged, finish included"; do
    k=${c%% *}
    echo "  ${c#* }: median of the cpu-swapped pairs $(pairs "$k" | median) % (quartiles $(pairs "$k" | quartiles) %)"
done
