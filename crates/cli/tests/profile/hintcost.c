/* Cost of a NUMA-balancing hinting fault, measured inside one process (for the induce_cost
 * example): a 64 MiB private buffer (16 384 pages) is rewritten, one write per page, for argv[1]
 * seconds (default 20) while the kernel's NUMA balancing (kernel.numa_balancing = 1) scans the
 * process. An idle second thread keeps the process multi-threaded: the kernel does not re-arm the
 * pages of a single-threaded process that are already on the node it runs on (change_pte_range),
 * which on a one-node machine is all of them. Each pass's time and minor faults (getrusage) are
 * recorded; passes without a fault are plain, passes with at least 64 are hinted. Prints the
 * median plain pass, the hinted passes and their faults, and "PERFAULT us" = the median over
 * hinted passes of (pass - median plain pass) / faults of the pass. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "passtime.h"

#define LEN (64UL << 20)
#define MAX_PASSES 400000

static void *idle(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 20;
    if (!(seconds > 0 && seconds < 3600)) seconds = 20;
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) != 0) { perror("pthread_create"); return 2; }
    char *b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { perror("mmap"); return 2; }
    madvise(b, LEN, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < LEN; i += 4096) b[i] = 1;
    double *plain = calloc(MAX_PASSES, sizeof *plain), *cost = calloc(MAX_PASSES, sizeof *cost),
           *hinted = calloc(MAX_PASSES, sizeof *hinted);
    long *hfaults = calloc(MAX_PASSES, sizeof *hfaults);
    if (!plain || !cost || !hinted || !hfaults) { perror("calloc"); return 2; }
    int np = 0, nh = 0;
    long total = 0;
    double end = now() + seconds;
    while (now() < end && np < MAX_PASSES && nh < MAX_PASSES) {
        long f0 = minflt();
        double t0 = now();
        for (size_t i = 0; i < LEN; i += 4096) b[i] += 1;
        double dt = now() - t0;
        long df = minflt() - f0;
        if (df == 0) {
            plain[np++] = dt;
        } else if (df >= 64) {
            hinted[nh] = dt;
            hfaults[nh++] = df;
            total += df;
        }
    }
    if (np == 0) { printf("NOPLAIN\n"); return 3; }
    double *sorted = calloc((size_t)np, sizeof *sorted);
    if (!sorted) { perror("calloc"); return 2; }
    for (int k = 0; k < np; k++) sorted[k] = plain[k];
    qsort(sorted, (size_t)np, sizeof *sorted, cmp);
    double base = sorted[np / 2];
    for (int k = 0; k < nh; k++) cost[k] = (hinted[k] - base) / (double)hfaults[k];
    qsort(cost, (size_t)nh, sizeof *cost, cmp);
    printf("PLAIN_PASSES %d\nPLAIN %.6f\nHINTED_PASSES %d\nHINT_FAULTS %ld\n", np, base, nh, total);
    if (nh > 0) printf("PERFAULT %.3f\n", cost[nh / 2] * 1e6);
    else printf("PERFAULT none\n");
    return 0;
}
