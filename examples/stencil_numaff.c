/* stencil_numaff.c: stencil.c with its grids allocated and placed by libnumaff (004 §3.1).
 *
 * The same computation as stencil.c, printing the same results, but u and v are n x n x n arrays
 * (numaff_alloc_3d, used through pointers to n x n planes) placed by bind_block: the planes (the
 * first index, libnumaff's rows) are split into one contiguous block per thread, each on the node
 * of its thread, which is the plane range that thread sweeps under schedule(static). The OpenMP
 * threads pin themselves first (numaff_bind_thread), one per core, so that they run there.
 *
 * Build:
 *   gcc -O2 -fopenmp stencil_numaff.c $(pkg-config --cflags --libs numaff) -o stencil_numaff
 * Usage: stencil_numaff [n [steps]]    as stencil.c. With EXAMPLES_PLACEMENT set it also prints
 * where the pages of each grid are (placement.h) and libnumaff's statistics (numaff_print_stats). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include <numaff.h>
#include <omp.h>

#include "placement.h"

#define NMAX 168 /* the largest n, as in stencil.c */

static double plane[NMAX];

static double source(long i, long j, long k) { return (double)((i * 7 + j * 3 + k) % 5) * 0.01; }

/* dst = one Jacobi sweep of src over the interior of the n x n x n corner. */
static void sweep(long n, double (*dst)[n][n], double (*src)[n][n])
{
#pragma omp parallel for schedule(static)
    for (long i = 1; i < n - 1; i++)
        for (long j = 1; j < n - 1; j++)
            for (long k = 1; k < n - 1; k++)
                dst[i][j][k] = (src[i - 1][j][k] + src[i + 1][j][k] + src[i][j - 1][k] +
                                src[i][j + 1][k] + src[i][j][k - 1] + src[i][j][k + 1]) /
                                   6.0 +
                               source(i, j, k);
}

static double total(long n, double (*g)[n][n])
{
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        double s = 0.0;
        for (long j = 0; j < n; j++)
            for (long k = 0; k < n; k++)
                s += g[i][j][k];
        plane[i] = s;
    }
    double s = 0.0;
    for (long i = 0; i < n; i++)
        s += plane[i];
    return s;
}

/* An n x n x n grid of doubles, its planes placed by bind_block (a failed placement leaves the
 * pages to first touch: warn and go on). */
static void *alloc(long n, const char *name)
{
    void *g = numaff_alloc_3d((size_t)n, (size_t)n, (size_t)n, sizeof(double));
    if (!g) {
        fprintf(stderr, "stencil_numaff: cannot allocate %s: %s\n", name, numaff_last_error());
        exit(1);
    }
    int rc = numaff_bind_block(g);
    if (rc != 0)
        fprintf(stderr, "stencil_numaff: bind_block(%s): %s: %s\n", name, numaff_strerror(rc),
                numaff_last_error());
    return g;
}

int main(int argc, char **argv)
{
    char *end;
    long n = argc > 1 ? strtol(argv[1], &end, 10) : NMAX;
    if (argc > 1 && (*end || n < 3 || n > NMAX)) {
        fprintf(stderr, "stencil_numaff: n must be an integer from 3 to %d (got '%s')\n", NMAX,
                argv[1]);
        return 2;
    }
    long steps = argc > 2 ? strtol(argv[2], &end, 10) : 20;
    if (argc > 2 && (*end || steps < 1 || steps > 100000)) {
        fprintf(stderr, "stencil_numaff: steps must be an integer from 1 to 100000 (got '%s')\n",
                argv[2]);
        return 2;
    }

    if (numaff_init() != 0) {
        fprintf(stderr, "stencil_numaff: numaff_init: %s\n", numaff_last_error());
        return 1;
    }
    /* Pin the threads one per core (004 §3.1's thread scheduling for the bind policies). */
#pragma omp parallel
    (void)numaff_bind_thread(omp_get_thread_num());
    double (*u)[n][n] = alloc(n, "u");
    double (*v)[n][n] = alloc(n, "v");

    /* Hot face i = 0, cold elsewhere; both grids hold the faces. */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            for (long k = 0; k < n; k++) {
                u[i][j][k] = i == 0 ? 1.0 : 0.0;
                v[i][j][k] = u[i][j][k];
            }
    printf("stencil: n %ld steps %ld\n", n, steps);
    printf("step 0 sum %.17g\n", total(n, u));
    for (long s = 1; s <= steps; s++) {
        if (s % 2)
            sweep(n, v, u);
        else
            sweep(n, u, v);
        if (s % 5 == 0 || s == steps)
            printf("step %ld sum %.17g\n", s, total(n, s % 2 ? v : u));
    }
    double (*last)[n][n] = steps % 2 ? v : u;
    printf("center %.17g corner %.17g\n", last[n / 2][n / 2][n / 2], last[1][1][1]);

    show_placement("u", u, (size_t)n * n * n * sizeof(double));
    show_placement("v", v, (size_t)n * n * n * sizeof(double));
    if (getenv("EXAMPLES_PLACEMENT"))
        (void)numaff_print_stats();
    numaff_free(u);
    numaff_free(v);
    return numaff_final() == 0 ? 0 : 1;
}
