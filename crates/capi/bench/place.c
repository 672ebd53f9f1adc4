/* Allocation + placement time of each libnumaff policy against malloc + first touch of the same
 * size, in the same run (libnumaff's performance figure).
 *
 * Baselines: malloc + writing one byte per page (the kernel's default, transparent huge pages as
 * the system's setting allows), and mmap + MADV_NOHUGEPAGE + the same touching (base pages, as
 * libnumaff's arrays use). Each policy: numaff_alloc_1d + the policy call, which faults every page
 * in on its node. Everything is single-threaded; each measurement is taken REPS times and the
 * fastest is printed (the baselines once before the policies and once after them).
 *
 * Build: gcc -O2 place.c $(pkg-config --cflags --libs numaff) -o place; run: ./place MIB [REPS]
 * `cargo bench -p numaff-capi --bench place` builds and runs it here and in a 4-node QEMU guest. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <numaff.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void touch(volatile char *m, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        m[i] = 1;
}

static double time_malloc(size_t n)
{
    double t0 = now();
    char *m = malloc(n);
    if (!m) {
        perror("malloc");
        exit(1);
    }
    touch(m, n);
    double t = now() - t0;
    free(m);
    return t;
}

static double time_mmap(size_t n)
{
    double t0 = now();
    char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(m, n, MADV_NOHUGEPAGE);
    touch(m, n);
    double t = now() - t0;
    munmap(m, n);
    return t;
}

static int bind_all_nodes(void *a) { return numaff_bind_all(a, NULL, 0); }
static int cyclic_block_auto(void *a) { return numaff_cyclic_block(a, 0); }
static int random_block_auto(void *a) { return numaff_random_block(a, 0); }

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024, n = mib << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 1;
    if (mib == 0 || reps < 1) {
        fprintf(stderr, "usage: place MIB [REPS]\n");
        return 2;
    }
    if (numaff_init() != 0) {
        fprintf(stderr, "numaff_init: %s\n", numaff_last_error());
        return 1;
    }
    printf("array %zu MiB, %d nodes, %d cpus, best of %d\n", mib, numaff_node_count(),
           numaff_cpu_count(), reps);
    double base_malloc = 1e30, base_mmap = 1e30;
    for (int r = 0; r < reps; r++) {
        double a = time_malloc(n), b = time_mmap(n);
        base_malloc = a < base_malloc ? a : base_malloc;
        base_mmap = b < base_mmap ? b : base_mmap;
    }
    const char *names[] = {"bind_all",     "bind_block", "cyclic",     "cyclic_block",
                           "skew_mapp",    "prime_mapp", "random",     "random_block"};
    int (*fs[])(void *) = {bind_all_nodes,    numaff_bind_block, numaff_cyclic,
                           cyclic_block_auto, numaff_skew_mapp,  numaff_prime_mapp,
                           numaff_random,     random_block_auto};
    double best[8];
    int rcs[8];
    for (int k = 0; k < 8; k++) {
        best[k] = 1e30;
        rcs[k] = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            char *a = numaff_alloc_1d(n, 1);
            if (!a) {
                fprintf(stderr, "numaff_alloc_1d: %s\n", numaff_last_error());
                return 1;
            }
            int rc = fs[k](a);
            double t = now() - t0;
            if (rc != 0)
                rcs[k] = rc;
            best[k] = t < best[k] ? t : best[k];
            numaff_free(a);
        }
    }
    for (int r = 0; r < reps; r++) {
        double a = time_malloc(n), b = time_mmap(n);
        base_malloc = a < base_malloc ? a : base_malloc;
        base_mmap = b < base_mmap ? b : base_mmap;
    }
    printf("%-13s %8.3f s  1.00x\n", "malloc+touch", base_malloc);
    printf("%-13s %8.3f s  %.2fx  (mmap, MADV_NOHUGEPAGE, touch)\n", "basepg+touch", base_mmap,
           base_mmap / base_malloc);
    for (int k = 0; k < 8; k++)
        printf("%-13s %8.3f s  %.2fx  rc %d\n", names[k], best[k], best[k] / base_malloc, rcs[k]);
    return numaff_final() == 0 ? 0 : 1;
}
