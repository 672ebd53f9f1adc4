/* placement.h: where the pages of an array are, as the kernel reports them (move_pages with
 * nodes = NULL, which moves nothing). Plain C and Linux, no libnumaff, so all four examples (and
 * MApp's rewrites of the plain ones) print the same kind of line and the tests compare placements
 * without trusting the library that made them.
 *
 * show_placement(name, array, bytes) prints nothing unless the environment variable
 * EXAMPLES_PLACEMENT is set (so the normal output of every version is the same and can be compared
 * byte for byte); with it set, one line per array:
 *
 *   PLACE name bytes B pages P absent A nodes N:C ... fnv H
 *
 * pages: the pages the array spans; absent: pages never touched (or not queryable); N:C: C pages on
 * node N; H: FNV-1a 64 of the page -> node sequence (one byte per page: the node, 255 if absent),
 * which the tests recompute from the policy's formula. Define _GNU_SOURCE (or _DEFAULT_SOURCE)
 * before the first #include, for syscall(). */
#ifndef EXAMPLES_PLACEMENT_H
#define EXAMPLES_PLACEMENT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PLACEMENT_BATCH 1024
#define PLACEMENT_MAX_NODES 64

static void show_placement(const char *name, const void *array, size_t bytes)
{
    if (!getenv("EXAMPLES_PLACEMENT") || bytes == 0)
        return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = (uintptr_t)array / page, last = ((uintptr_t)array + bytes - 1) / page;
    size_t npages = (size_t)(last - first + 1), absent = 0;
    long count[PLACEMENT_MAX_NODES] = {0};
    uint64_t hash = 0xcbf29ce484222325ULL;
    void *pages[PLACEMENT_BATCH];
    int status[PLACEMENT_BATCH];
    for (size_t done = 0; done < npages; done += PLACEMENT_BATCH) {
        size_t k = npages - done < PLACEMENT_BATCH ? npages - done : PLACEMENT_BATCH;
        for (size_t i = 0; i < k; i++)
            pages[i] = (void *)((first + done + i) * page);
        if (syscall(SYS_move_pages, 0, (unsigned long)k, pages, NULL, status, 0) != 0) {
            perror("placement: move_pages (query)");
            return;
        }
        for (size_t i = 0; i < k; i++) {
            int node = status[i];
            if (node < 0 || node >= PLACEMENT_MAX_NODES) {
                absent++;
                node = 255;
            } else {
                count[node]++;
            }
            hash = (hash ^ (uint64_t)node) * 0x100000001b3ULL;
        }
    }
    printf("PLACE %s bytes %zu pages %zu absent %zu nodes", name, bytes, npages, absent);
    for (int n = 0; n < PLACEMENT_MAX_NODES; n++)
        if (count[n])
            printf(" %d:%ld", n, count[n]);
    printf(" fnv %016llx\n", (unsigned long long)hash);
    fflush(stdout);
}

#endif /* EXAMPLES_PLACEMENT_H */
