/* cg_numaff.c: cg.c with its arrays allocated and placed by libnumaff (MAi-style, 004 §3.1).
 *
 * The same computation as cg.c, printing the same results, but the arrays are sized for the n rows
 * of the run (numaff_alloc_1d) and placed by memory policy instead of first touch:
 *  - rowptr, val, col, x, r, q: bind_block. Thread t reads and writes only its own rows of these
 *    (schedule(static)), so each thread's block of rows goes on the node it runs on;
 *  - p: cyclic. The sparse mat-vec gathers p[col[k]] from everywhere (irregular), so its pages are
 *    spread page by page over all nodes for bandwidth rather than kept on one.
 * The OpenMP threads pin themselves first (numaff_bind_thread), one per core, so that they run
 * where bind_block put their blocks; libgomp keeps the same threads for the later regions.
 *
 * Build: gcc -O2 -fopenmp cg_numaff.c $(pkg-config --cflags --libs numaff) -o cg_numaff
 * Usage: cg_numaff [n [iters]]    as cg.c. With EXAMPLES_PLACEMENT set it also prints where the
 * pages of each array are (placement.h) and libnumaff's statistics (numaff_print_stats). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include <numaff.h>
#include <omp.h>

#include "placement.h"

#define NMAX (1 << 20) /* the largest n, as in cg.c */
#define NCHUNK 64

static double part[NCHUNK];

static long perm_a, perm_c, perm_ainv, offsets[4];

static long gcd(long a, long b)
{
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The inverse of a modulo n (a and n coprime), by the extended Euclidean algorithm. */
static long inverse_mod(long a, long n)
{
    long t = 0, t1 = 1, g = n, g1 = a;
    while (g1) {
        long k = g / g1, tmp;
        tmp = t - k * t1;
        t = t1;
        t1 = tmp;
        tmp = g - k * g1;
        g = g1;
        g1 = tmp;
    }
    return t < 0 ? t + n : t;
}

static void setup_permutation(long n)
{
    perm_a = (n * 618) / 1000 | 1;
    while (gcd(perm_a, n) != 1)
        perm_a += 2;
    perm_c = n / 3;
    perm_ainv = inverse_mod(perm_a, n);
    offsets[0] = 1;
    offsets[1] = 1 + n / 97;
    offsets[2] = 1 + n / 11;
    offsets[3] = 1 + n / 3;
}

/* Row i of the matrix is row perm(i) of the banded one; its column v is column unperm(v). */
static long perm(long i, long n) { return (perm_a * i + perm_c) % n; }
static long unperm(long v, long n) { return perm_ainv * ((v - perm_c + n) % n) % n; }

/* Off-diagonal value of the banded matrix at (u, v), symmetric in u and v; at most 8 of them,
 * each at most 0.875 in magnitude, against a diagonal of 8: strictly diagonally dominant. */
static double weight(long u, long v) { return -(0.5 + 0.125 * (double)((u + v) % 4)); }

static int row_count(long u, long n)
{
    int c = 1;
    for (int k = 0; k < 4; k++)
        c += (u - offsets[k] >= 0) + (u + offsets[k] < n);
    return c;
}

static double dot(const double *a, const double *b, long n)
{
#pragma omp parallel for schedule(static)
    for (int c = 0; c < NCHUNK; c++) {
        long lo = n * c / NCHUNK, hi = n * (c + 1) / NCHUNK;
        double s = 0.0;
        for (long i = lo; i < hi; i++)
            s += a[i] * b[i];
        part[c] = s;
    }
    double s = 0.0;
    for (int c = 0; c < NCHUNK; c++)
        s += part[c];
    return s;
}

static void *alloc(size_t nelem, size_t elem_size, const char *name)
{
    void *a = numaff_alloc_1d(nelem, elem_size);
    if (!a) {
        fprintf(stderr, "cg_numaff: cannot allocate %s: %s\n", name, numaff_last_error());
        exit(1);
    }
    return a;
}

/* A placement that fails leaves the pages where first touch puts them: warn and go on. */
static void place(int rc, const char *policy, const char *name)
{
    if (rc != 0)
        fprintf(stderr, "cg_numaff: %s(%s): %s: %s\n", policy, name, numaff_strerror(rc),
                numaff_last_error());
}

int main(int argc, char **argv)
{
    char *end;
    long n = argc > 1 ? strtol(argv[1], &end, 10) : NMAX;
    if (argc > 1 && (*end || n < 64 || n > NMAX)) {
        fprintf(stderr, "cg_numaff: n must be an integer from 64 to %d (got '%s')\n", NMAX,
                argv[1]);
        return 2;
    }
    long iters = argc > 2 ? strtol(argv[2], &end, 10) : 25;
    if (argc > 2 && (*end || iters < 1 || iters > 100000)) {
        fprintf(stderr, "cg_numaff: iters must be an integer from 1 to 100000 (got '%s')\n",
                argv[2]);
        return 2;
    }
    setup_permutation(n);

    if (numaff_init() != 0) {
        fprintf(stderr, "cg_numaff: numaff_init: %s\n", numaff_last_error());
        return 1;
    }
    /* Pin the threads one per core (004 §3.1's thread scheduling for the bind policies). */
#pragma omp parallel
    (void)numaff_bind_thread(omp_get_thread_num());

    int *rowptr = alloc((size_t)n + 1, sizeof(int), "rowptr");
    place(numaff_bind_block(rowptr), "bind_block", "rowptr");
    double *x = alloc((size_t)n, sizeof(double), "x");
    place(numaff_bind_block(x), "bind_block", "x");
    double *r = alloc((size_t)n, sizeof(double), "r");
    place(numaff_bind_block(r), "bind_block", "r");
    double *q = alloc((size_t)n, sizeof(double), "q");
    place(numaff_bind_block(q), "bind_block", "q");
    double *p = alloc((size_t)n, sizeof(double), "p");
    place(numaff_cyclic(p), "cyclic", "p");

    /* The matrix: row sizes in order (rowptr), then the rows in parallel. */
    rowptr[0] = 0;
    for (long i = 0; i < n; i++)
        rowptr[i + 1] = rowptr[i] + row_count(perm(i, n), n);
    long nnz = rowptr[n];
    double *val = alloc((size_t)nnz, sizeof(double), "val");
    place(numaff_bind_block(val), "bind_block", "val");
    int *col = alloc((size_t)nnz, sizeof(int), "col");
    place(numaff_bind_block(col), "bind_block", "col");
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        long u = perm(i, n), k = rowptr[i];
        col[k] = (int)i;
        val[k++] = 8.0;
        for (int o = 0; o < 4; o++) {
            if (u - offsets[o] >= 0) {
                col[k] = (int)unperm(u - offsets[o], n);
                val[k++] = weight(u, u - offsets[o]);
            }
            if (u + offsets[o] < n) {
                col[k] = (int)unperm(u + offsets[o], n);
                val[k++] = weight(u, u + offsets[o]);
            }
        }
    }

    /* x = 0, r = b - A x = b, p = r. */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        x[i] = 0.0;
        r[i] = 1.0 + (double)(i % 7) * 0.125;
        p[i] = r[i];
        q[i] = 0.0;
    }
    double rr = dot(r, r, n);
    printf("cg: n %ld nnz %ld iters %ld\n", n, nnz, iters);
    printf("iter %ld rr %.17g\n", 0L, rr);
    for (long it = 1; it <= iters; it++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) {
            double s = 0.0;
            for (int k = rowptr[i]; k < rowptr[i + 1]; k++)
                s += val[k] * p[col[k]];
            q[i] = s;
        }
        double alpha = rr / dot(p, q, n);
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        double rr_new = dot(r, r, n), beta = rr_new / rr;
        rr = rr_new;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            p[i] = r[i] + beta * p[i];
        printf("iter %ld rr %.17g\n", it, rr);
    }
    printf("x.x %.17g x[0] %.17g x[n-1] %.17g\n", dot(x, x, n), x[0], x[n - 1]);

    show_placement("val", val, (size_t)nnz * sizeof(double));
    show_placement("col", col, (size_t)nnz * sizeof(int));
    show_placement("rowptr", rowptr, ((size_t)n + 1) * sizeof(int));
    show_placement("x", x, (size_t)n * sizeof(double));
    show_placement("r", r, (size_t)n * sizeof(double));
    show_placement("p", p, (size_t)n * sizeof(double));
    show_placement("q", q, (size_t)n * sizeof(double));
    if (getenv("EXAMPLES_PLACEMENT"))
        (void)numaff_print_stats();
    numaff_free(val);
    numaff_free(col);
    numaff_free(rowptr);
    numaff_free(x);
    numaff_free(r);
    numaff_free(p);
    numaff_free(q);
    return numaff_final() == 0 ? 0 : 1;
}
