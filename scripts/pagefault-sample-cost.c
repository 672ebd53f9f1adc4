/* The kernel's cost per page fault of a page-fault perf event (crates/linux/README.md, "Samplers"):
 * a thread pinned to cpu 0 faults ROUNDS x 8192 fresh pages; the ring (512 data pages) is drained
 * between rounds; prints the thread's cpu time per fault. Compare against mode 0 (no event).
 *   cc -O2 -o /tmp/pfcost scripts/pagefault-sample-cost.c
 *   /tmp/pfcost MODE SAMPLE_TYPE_HEX CLOCKID PERCPU INHERIT [ROUNDS]
 * MODE 0 no event, 1 counting, 2 sampling (period 1) with SAMPLE_TYPE_HEX (e.g. e = TID|TIME|ADDR,
 * 8e adds CPU), 3 sampling in frequency mode (the kernel adapts the period to ARG samples per
 * second); CLOCKID -1 for perf's default clock, 1 CLOCK_MONOTONIC; PERCPU 1 opens the event
 * on cpu 0 only (as numaff, one per cpu); INHERIT 1 sets inherit; ARG: mode 2's period (default 1)
 * or mode 3's frequency. The ring's head over 32 bytes counts TID|TIME|ADDR samples.
 *   /tmp/pfcost MODE SAMPLE_TYPE_HEX CLOCKID PERCPU INHERIT [ROUNDS [ARG]] */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <stdint.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

int main(int argc, char **argv) {
    /* args: mode(0 none,1 count,2 sample) sample_type_hex clockid(-1 none) percpu(0/1) inherit(0/1) rounds */
    int mode = atoi(argv[1]);
    uint64_t st = strtoull(argv[2], 0, 16);
    int clk = atoi(argv[3]);
    int percpu = atoi(argv[4]);
    int inherit = atoi(argv[5]);
    int rounds = argc > 6 ? atoi(argv[6]) : 16;
    uint64_t arg = argc > 7 ? strtoull(argv[7], 0, 10) : 1;
    const size_t CHUNK = 8192, PG = 4096, RINGP = 512;
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(0, &s); sched_setaffinity(0, sizeof s, &s);
    int fd = -1; struct perf_event_mmap_page *mp = NULL;
    if (mode) {
        struct perf_event_attr a; memset(&a, 0, sizeof a);
        a.size = sizeof a; a.type = PERF_TYPE_SOFTWARE; a.config = PERF_COUNT_SW_PAGE_FAULTS;
        a.exclude_kernel = 1; a.exclude_hv = 1; a.inherit = inherit;
        if (mode >= 2) { a.sample_period = arg; a.sample_type = st; a.wakeup_watermark = RINGP * PG / 4; a.watermark = 1; }
        if (mode == 3) a.freq = 1; /* sample_freq shares sample_period's field */
        if (clk >= 0) { a.use_clockid = 1; a.clockid = clk; }
        fd = syscall(SYS_perf_event_open, &a, 0, percpu ? 0 : -1, -1, 0);
        if (fd < 0) { perror("perf_event_open"); return 1; }
        if (mode >= 2) {
            mp = mmap(NULL, (RINGP + 1) * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (mp == MAP_FAILED) { perror("mmap"); return 1; }
        }
    }
    double tw = 0, tc = 0; size_t faults = 0;
    for (int r = 0; r < rounds; r++) {
        char *b = mmap(NULL, CHUNK * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        madvise(b, CHUNK * PG, MADV_NOHUGEPAGE);
        double w0 = now(), c0 = cpu();
        for (size_t i = 0; i < CHUNK; i++) b[i * PG] = 1;
        tc += cpu() - c0; tw += now() - w0; faults += CHUNK;
        munmap(b, CHUNK * PG);
        if (mp) { __sync_synchronize(); mp->data_tail = mp->data_head; }
    }
    uint64_t lost_check = 0;
    if (mp) { lost_check = mp->data_head; }
    printf("mode %d st %#lx clk %d percpu %d inherit %d arg %lu: %.3f us/fault cpu, %.3f wall (%zu faults, ring head %lu, ~%lu samples)\n",
           mode, (unsigned long)st, clk, percpu, inherit, (unsigned long)arg, tc / faults * 1e6, tw / faults * 1e6, faults,
           (unsigned long)lost_check, (unsigned long)(lost_check / 32));
    return 0;
}
