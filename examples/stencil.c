/* stencil.c: a 3-D 7-point Jacobi stencil (regular accesses), plain C and OpenMP.
 *
 * Jacobi sweeps on an n x n x n grid: every interior point becomes the mean of its six neighbours
 * plus a fixed source term; the faces keep their values. Two grids, u and v, alternate as source
 * and destination. Each thread sweeps its own planes (first index, schedule(static)) and reads one
 * plane of its neighbours on each side: the regular pattern the bind policies are made for.
 *
 * The grids are static, sized for NMAX (168^3 doubles = 36 MiB each), and a run uses the
 * n x n x n corner (argv[1]). Pages are placed by first touch: each thread initialises its planes.
 * `numaff mapp stencil.c` rewrites u and v into libnumaff allocations; stencil_numaff.c places
 * them by hand.
 *
 * The printed results do not depend on the thread count or on where pages are: each point is
 * computed alone, and sums go plane by plane, each plane in order, then the planes in order.
 *
 * Usage: stencil [n [steps]]    n (3 <= n <= NMAX, default NMAX), steps (default 20).
 * With EXAMPLES_PLACEMENT set it also prints where the pages of each grid are (placement.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "placement.h"

#define NMAX 168

static double u[NMAX][NMAX][NMAX];
static double v[NMAX][NMAX][NMAX];
static double plane[NMAX];

static double source(long i, long j, long k) { return (double)((i * 7 + j * 3 + k) % 5) * 0.01; }

/* dst = one Jacobi sweep of src over the interior of the n x n x n corner. */
static void sweep(double (*dst)[NMAX][NMAX], double (*src)[NMAX][NMAX], long n)
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

static double total(double (*g)[NMAX][NMAX], long n)
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

int main(int argc, char **argv)
{
    char *end;
    long n = argc > 1 ? strtol(argv[1], &end, 10) : NMAX;
    if (argc > 1 && (*end || n < 3 || n > NMAX)) {
        fprintf(stderr, "stencil: n must be an integer from 3 to %d (got '%s')\n", NMAX, argv[1]);
        return 2;
    }
    long steps = argc > 2 ? strtol(argv[2], &end, 10) : 20;
    if (argc > 2 && (*end || steps < 1 || steps > 100000)) {
        fprintf(stderr, "stencil: steps must be an integer from 1 to 100000 (got '%s')\n",
                argv[2]);
        return 2;
    }

    /* Hot face i = 0, cold elsewhere; both grids hold the faces. */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            for (long k = 0; k < n; k++) {
                u[i][j][k] = i == 0 ? 1.0 : 0.0;
                v[i][j][k] = u[i][j][k];
            }
    printf("stencil: n %ld steps %ld\n", n, steps);
    printf("step 0 sum %.17g\n", total(u, n));
    for (long s = 1; s <= steps; s++) {
        if (s % 2)
            sweep(v, u, n);
        else
            sweep(u, v, n);
        if (s % 5 == 0 || s == steps)
            printf("step %ld sum %.17g\n", s, total(s % 2 ? v : u, n));
    }
    double (*last)[NMAX][NMAX] = steps % 2 ? v : u;
    printf("center %.17g corner %.17g\n", last[n / 2][n / 2][n / 2], last[1][1][1]);

    show_placement("u", u, (size_t)NMAX * NMAX * NMAX * sizeof(double));
    show_placement("v", v, (size_t)NMAX * NMAX * NMAX * sizeof(double));
    return 0;
}
