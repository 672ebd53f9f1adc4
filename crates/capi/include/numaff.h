/*
 * numaff.h: libnumaff, array allocation and placement on NUMA machines (MAi-style, Minas 004 §3.1).
 *
 * The library discovers the machine (nodes, cpus, caches) at numaff_init; the caller never names
 * nodes or cpus unless it wants to (bind_all, migrate, user thread mappings), so the same program
 * places its data well on any NUMA machine.
 *
 * Conventions (hwloc style):
 *  - Functions returning int return 0 (NUMAFF_OK) on success and a negative NUMAFF_E* code on error;
 *    numaff_strerror(code) gives the code's text and numaff_last_error() the detailed message of the
 *    calling thread's last failed call (what failed, on what; like errno, not cleared on success).
 *  - Allocation functions return NULL on error (numaff_last_error says why).
 *  - Every function is safe to call from several threads: calls are serialised inside the library.
 *    A placement call must not run while other threads write the same array (pages move under them
 *    only through the kernel's migration, which is safe, but the placement reads the page list first).
 *  - No function aborts the program: internal failures are returned as NUMAFF_EINTERNAL.
 *  - Node and cpu numbers are the kernel's. "Rows" are along the first dimension of an array: a row
 *    of a 1-D array is one element, of a 2-D array rows x cols one row of cols elements, of a 3-D
 *    array nx x ny x nz one ny x nz plane.
 *  - Arrays use base pages (transparent huge pages are disabled on them) so that every page can be
 *    placed on its own node. A policy places every page of the array at once (pages are faulted in
 *    on their node, or moved there when present) and then binds them, so the kernel's NUMA
 *    balancing does not move them back. Applying another policy later migrates the pages.
 */
#ifndef NUMAFF_H
#define NUMAFF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NUMAFF_VERSION_MAJOR 0
#define NUMAFF_VERSION_MINOR 1
#define NUMAFF_VERSION_PATCH 0

/* Error codes. */
#define NUMAFF_OK 0
#define NUMAFF_ENOTINIT (-1)  /* numaff_init not called (or numaff_final already called) */
#define NUMAFF_EINVAL (-2)    /* invalid argument: NULL, zero size, overflow, bad option */
#define NUMAFF_ENOMEM (-3)    /* cannot map the memory, or a node has no room for the pages */
#define NUMAFF_ENOARRAY (-4)  /* pointer is not the start of an array from numaff_alloc_* */
#define NUMAFF_ENODE (-5)     /* node or cpu not on this machine or not allowed to the process */
#define NUMAFF_ESYS (-6)      /* a system call failed; see numaff_last_error */
#define NUMAFF_EPARTIAL (-7)  /* placed, but some pages are not on their node (busy, ...) */
#define NUMAFF_ETOPO (-8)     /* the machine topology could not be discovered */
#define NUMAFF_EINTERNAL (-9) /* a bug in libnumaff; the program's data is untouched */

/* Thread schedules for the bind policies (numaff_set_sched). */
#define NUMAFF_SCHED_PIN 0  /* default: thread t on its own core when threads <= cores */
#define NUMAFF_SCHED_OS 1   /* the operating system places threads; numaff_bind_thread is a no-op */
#define NUMAFF_SCHED_USER 2 /* thread t on the t-th cpu of numaff_set_thread_cpus */

/* ---- System functions ---- */

/* Discovers the machine and initialises the library. May be called again (calls are counted).
 * Errors: NUMAFF_ETOPO (discovery failed), NUMAFF_EINTERNAL. */
int numaff_init(void);

/* Ends one numaff_init. At the last one the library state is released; arrays not freed stay mapped
 * until the process exits. Errors: NUMAFF_ENOTINIT (no matching numaff_init). */
int numaff_final(void);

/* The library version, "MAJOR.MINOR.PATCH" (static string). */
const char *numaff_version(void);

/* The text of an error code (static string; "unknown error code" for others). */
const char *numaff_strerror(int code);

/* The detailed message of the calling thread's last failed call ("" if none failed yet). Valid
 * until the thread's next failed libnumaff call. */
const char *numaff_last_error(void);

/* Number of memory nodes the policies use (the machine's nodes allowed to this process), or a
 * negative error (NUMAFF_ENOTINIT). */
int numaff_node_count(void);

/* Writes up to max node ids into out; returns the number of nodes, or NUMAFF_ENOTINIT /
 * NUMAFF_EINVAL (out NULL with max > 0). */
int numaff_nodes(int *out, int max);

/* Number of cpus (PUs) this process may use, or NUMAFF_ENOTINIT. */
int numaff_cpu_count(void);

/* ---- Allocation ---- */

/* Allocates a zeroed, page-aligned, contiguous array of nelem elements of elem_size bytes. No page
 * is placed until a policy is applied (else first touch decides). Returns NULL on error:
 * NUMAFF_ENOTINIT, NUMAFF_EINVAL (zero or overflowing size), NUMAFF_ENOMEM. */
void *numaff_alloc_1d(size_t nelem, size_t elem_size);

/* As numaff_alloc_1d for a row-major rows x cols array (use it as T (*)[cols]). */
void *numaff_alloc_2d(size_t rows, size_t cols, size_t elem_size);

/* As numaff_alloc_1d for a row-major nx x ny x nz array (use it as T (*)[ny][nz]). */
void *numaff_alloc_3d(size_t nx, size_t ny, size_t nz, size_t elem_size);

/* Frees an array from numaff_alloc_*. Errors: NUMAFF_ENOTINIT, NUMAFF_EINVAL (NULL),
 * NUMAFF_ENOARRAY, NUMAFF_ESYS. */
int numaff_free(void *array);

/* ---- Memory policies ----
 * Each applies to a whole array (the pointer numaff_alloc_* returned) and places all its pages now;
 * applying another policy later moves the pages (a migration, counted in the statistics).
 * Common errors: NUMAFF_ENOTINIT, NUMAFF_EINVAL (NULL), NUMAFF_ENOARRAY, NUMAFF_ESYS (mbind /
 * move_pages refused), NUMAFF_ENOMEM or NUMAFF_EPARTIAL (some pages could not go to their node; the
 * others are placed). */

/* bind_all: pages on the nnodes nodes given, filling the free memory of the first before using the
 * next. nodes NULL / nnodes 0: all nodes. Extra error: NUMAFF_ENODE (a node not on the machine). */
int numaff_bind_all(void *array, const int *nodes, int nnodes);

/* bind_block: the rows split into one contiguous block per thread (threads: numaff_set_threads,
 * else OMP_NUM_THREADS, else the cpu count), block t on the node where thread t runs under the
 * schedule (see numaff_bind_thread). */
int numaff_bind_block(void *array);

/* cyclic: page i on node i mod M (M nodes, round-robin). */
int numaff_cyclic(void *array);

/* cyclic_block: blocks of block_rows rows round-robin over the nodes; block_rows 0: rows / threads. */
int numaff_cyclic_block(void *array, size_t block_rows);

/* skew_mapp: page i on node (i + floor(i / M) + 1) mod M. */
int numaff_skew_mapp(void *array);

/* prime_mapp: pages cyclic over P virtual nodes (P the smallest prime >= M); pages of virtual nodes
 * M..P-1 then go cyclically, in page order, over the M real nodes. */
int numaff_prime_mapp(void *array);

/* random: each page on a uniformly random node (seeded: numaff_set_seed, env NUMAFF_SEED). */
int numaff_random(void *array);

/* random_block: blocks of block_rows rows (0: rows / threads), each on a uniformly random node. */
int numaff_random_block(void *array, size_t block_rows);

/* Moves rows [first_row, first_row + nrows) (nrows 0: to the end) onto the nnodes nodes given, in
 * contiguous equal parts. Extra errors: NUMAFF_EINVAL (first_row past the end, no node),
 * NUMAFF_ENODE. */
int numaff_migrate(void *array, size_t first_row, size_t nrows, const int *nodes, int nnodes);

/* Moves columns [first_col, first_col + ncols) (ncols 0: to the end) of every row of a 2-D or 3-D
 * array onto the nnodes nodes given, the columns split in contiguous equal parts (part p on
 * nodes[p]). Columns are the second dimension (cols of a rows x cols array, ny of nx x ny x nz).
 * Placement is per page: a page holding elements of the columns moves with them (with the other
 * columns it holds), a page holding elements of several parts goes to the first part's node.
 * Extra errors: NUMAFF_EINVAL (1-D array, first_col past the end, no node), NUMAFF_ENODE. */
int numaff_migrate_cols(void *array, size_t first_col, size_t ncols, const int *nodes, int nnodes);

/* ---- Thread scheduling (for the bind policies) ---- */

/* The thread count the block policies assume (0: back to OMP_NUM_THREADS / the cpu count).
 * Errors: NUMAFF_ENOTINIT, NUMAFF_EINVAL (negative). */
int numaff_set_threads(int nthreads);

/* Chooses the schedule: NUMAFF_SCHED_PIN (default), NUMAFF_SCHED_OS, NUMAFF_SCHED_USER.
 * Errors: NUMAFF_ENOTINIT, NUMAFF_EINVAL. */
int numaff_set_sched(int mode);

/* A user mapping: thread t runs on cpus[t mod ncpus] (sets NUMAFF_SCHED_USER; ncpus 0: back to
 * NUMAFF_SCHED_PIN). Errors: NUMAFF_ENOTINIT, NUMAFF_EINVAL, NUMAFF_ENODE (a cpu not on the machine). */
int numaff_set_thread_cpus(const int *cpus, int ncpus);

/* Pins the calling thread as thread `thread` of the schedule, e.g. in an OpenMP program:
 *   #pragma omp parallel
 *   numaff_bind_thread(omp_get_thread_num());
 * Under NUMAFF_SCHED_PIN thread t goes to its own core when threads <= cores (else PU t mod PUs).
 * Does nothing under NUMAFF_SCHED_OS. Errors: NUMAFF_ENOTINIT, NUMAFF_EINVAL, NUMAFF_ESYS. */
int numaff_bind_thread(int thread);

/* The node thread `thread` runs on under the schedule (where bind_block puts its block), or a
 * negative error. */
int numaff_thread_node(int thread);

/* Seed of the random policies. Errors: NUMAFF_ENOTINIT. */
int numaff_set_seed(uint64_t seed);

/* ---- Statistics ---- */

/* Pages of the array present on `node` now (node -1: pages not present), or a negative error. */
int64_t numaff_pages_on_node(void *array, int node);

/* Pages moved by the library so far (policy changes and migrations), or a negative error. */
int64_t numaff_migrated_pages(void);

/* Prints the machine, the nodes and cpus in use, each array's policy and pages per node, and the
 * pages migrated, to stdout. Errors: NUMAFF_ENOTINIT, NUMAFF_ESYS. */
int numaff_print_stats(void);

#ifdef __cplusplus
}
#endif

#endif /* NUMAFF_H */
