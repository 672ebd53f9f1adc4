/* Cost of a soft-dirty induced fault, measured inside one process (for the induce_cost example):
 * a 16 MiB private buffer (4096 pages) is rewritten (one write per page) argv[1] times (default 40)
 * right after writing 4 to /proc/self/clear_refs, and as often without; passes alternate. Prints
 * the median pass time of each, the median clear_refs time and the faults per re-armed pass
 * (getrusage), and "PERFAULT us" = (rearmed - plain) / faults per pass. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "passtime.h"

#define LEN (16UL << 20)


int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 40;
    if (n < 1 || n > 10000) n = 40;
    char *b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { perror("mmap"); return 2; }
    madvise(b, LEN, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < LEN; i += 4096) b[i] = 1;
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0) { perror("open /proc/self/clear_refs"); return 2; }
    double *plain = calloc((size_t)n, sizeof *plain), *armed = calloc((size_t)n, sizeof *armed),
           *clear = calloc((size_t)n, sizeof *clear);
    long faults = 0;
    for (int k = 0; k < n; k++) {
        double t0 = now();
        for (size_t i = 0; i < LEN; i += 4096) b[i] += 1;
        plain[k] = now() - t0;
        t0 = now();
        if (write(fd, "4", 1) != 1) { perror("write clear_refs"); return 2; }
        clear[k] = now() - t0;
        long f0 = minflt();
        t0 = now();
        for (size_t i = 0; i < LEN; i += 4096) b[i] += 1;
        armed[k] = now() - t0;
        faults += minflt() - f0;
    }
    qsort(plain, (size_t)n, sizeof *plain, cmp);
    qsort(armed, (size_t)n, sizeof *armed, cmp);
    qsort(clear, (size_t)n, sizeof *clear, cmp);
    double per_pass = (double)faults / n;
    printf("PLAIN %.6f\nARMED %.6f\nCLEAR_REFS %.6f\nFAULTS_PER_PASS %.0f\nPERFAULT %.3f\n",
           plain[n / 2], armed[n / 2], clear[n / 2], per_pass,
           (armed[n / 2] - plain[n / 2]) / (per_pass > 0 ? per_pass : 1) * 1e6);
    return 0;
}
