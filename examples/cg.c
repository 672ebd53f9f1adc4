/* cg.c: a CG-like sparse kernel (irregular accesses), plain C and OpenMP.
 *
 * Conjugate-gradient iterations on a sparse symmetric positive definite matrix stored in CSR form
 * (val, col, rowptr). The matrix is banded (offsets 1, D2, D3 and D4 on both sides of the
 * diagonal) with its rows and columns permuted by the affine map i -> (a i + c) mod n, so the
 * sparse matrix-vector product gathers p[] from all over the vector, like NAS CG.
 *
 * The arrays are static, sized for NMAX rows (the matrix arrays are 72 and 36 MiB, the vectors
 * 8 MiB each), and a run uses the first n rows (argv[1]). Pages are placed by first touch: each
 * thread initialises the rows it computes (schedule(static) everywhere). `numaff mapp cg.c`
 * rewrites the large arrays into libnumaff allocations; cg_numaff.c places them by hand.
 *
 * The printed results do not depend on the thread count or on where pages are: every dot product
 * is summed in NCHUNK fixed chunks, each chunk in order, then the chunks in order.
 *
 * Usage: cg [n [iters]]    n rows (64 <= n <= NMAX, default NMAX), iters (default 25).
 * With EXAMPLES_PLACEMENT set it also prints where the pages of each array are (placement.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "placement.h"

#define NMAX (1 << 20)
#define ROW_NNZ 9
#define NNZMAX (NMAX * ROW_NNZ)
#define NCHUNK 64

static double val[NNZMAX];
static int col[NNZMAX];
static int rowptr[NMAX + 1];
static double x[NMAX];
static double r[NMAX];
static double p[NMAX];
static double q[NMAX];
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

int main(int argc, char **argv)
{
    char *end;
    long n = argc > 1 ? strtol(argv[1], &end, 10) : NMAX;
    if (argc > 1 && (*end || n < 64 || n > NMAX)) {
        fprintf(stderr, "cg: n must be an integer from 64 to %d (got '%s')\n", NMAX, argv[1]);
        return 2;
    }
    long iters = argc > 2 ? strtol(argv[2], &end, 10) : 25;
    if (argc > 2 && (*end || iters < 1 || iters > 100000)) {
        fprintf(stderr, "cg: iters must be an integer from 1 to 100000 (got '%s')\n", argv[2]);
        return 2;
    }
    setup_permutation(n);

    /* The matrix: row sizes in order (rowptr), then the rows in parallel. */
    rowptr[0] = 0;
    for (long i = 0; i < n; i++)
        rowptr[i + 1] = rowptr[i] + row_count(perm(i, n), n);
    long nnz = rowptr[n];
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

    show_placement("val", val, (size_t)NNZMAX * sizeof(double));
    show_placement("col", col, (size_t)NNZMAX * sizeof(int));
    show_placement("rowptr", rowptr, (size_t)(NMAX + 1) * sizeof(int));
    show_placement("x", x, (size_t)NMAX * sizeof(double));
    show_placement("r", r, (size_t)NMAX * sizeof(double));
    show_placement("p", p, (size_t)NMAX * sizeof(double));
    show_placement("q", q, (size_t)NMAX * sizeof(double));
    return 0;
}
