/* Rewrites one buffer again and again, for the cost and visibility of induced faults: argv[1] MiB
 * (default 64), argv[2] passes (default 40), argv[3] "shared" for MAP_SHARED memory (else private).
 * Transparent huge pages are off for the buffer (a first touch then faults once per 4 KiB page).
 * Prints "BUF start end" and, at the end, "SECONDS s" for the passes after the first and
 * "FAULTS n", the minor faults of the process (getrusage). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    int passes = argc > 2 ? atoi(argv[2]) : 40;
    int shared = argc > 3 && strcmp(argv[3], "shared") == 0;
    size_t len = mib << 20;
    char *b = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { perror("mmap"); return 2; }
    madvise(b, len, MADV_NOHUGEPAGE);
    printf("BUF %lu %lu\n", (unsigned long)b, (unsigned long)(b + len));
    fflush(stdout);
    memset(b, 1, len);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < len; i += 4096) b[i] += (char)p;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("SECONDS %.6f\nFAULTS %ld\n",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9, ru.ru_minflt);
    return 0;
}
