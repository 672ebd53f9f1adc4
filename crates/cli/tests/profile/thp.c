/* Touches an 8 MiB buffer aligned to 2 MiB with MADV_HUGEPAGE (one write per 4 KiB page), then
 * stays 600 ms so that numaff sees its huge pages. Prints "BUF start end" and "THP_KB n" (the huge
 * pages the kernel actually gave the process) for the test. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE (2UL << 20)
#define SZ (8UL << 20)

int main(void) {
    char *m = mmap(NULL, SZ + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    char *b = (char *)(((uintptr_t)m + HUGE - 1) & ~(HUGE - 1));
    madvise(b, SZ, MADV_HUGEPAGE);
    for (unsigned long i = 0; i < SZ; i += 4096) b[i] = (char)(i + 1);
    printf("BUF %lu %lu\n", (unsigned long)b, (unsigned long)b + SZ);
    /* What the kernel gave: AnonHugePages of the whole process (a fragmented host may give none). */
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    unsigned long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lu kB", &kb) == 1) break;
    if (f) fclose(f);
    printf("THP_KB %lu\n", kb);
    fflush(stdout);
    usleep(600 * 1000);
    return 0;
}
