/* Placement check for libnumaff, run in multi-node QEMU guests by tests/guest_placement.rs.
 * Prints, after each policy, the node of every page of a test array as the kernel reports it
 * (move_pages with nodes = NULL, independent of the library), the pages migrated so far, and
 * whether the array's contents survived; the Rust test compares with the pure page -> node
 * functions. One element per page (4096-byte elements), so rows = pages. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <numaff.h>

#define NPAGES 64
#define PAGE 4096

static char *arr;

static void check(int rc, const char *what) {
  if (rc != 0) {
    printf("FAIL %s: %d %s: %s\n", what, rc, numaff_strerror(rc), numaff_last_error());
    exit(1);
  }
}

static void show_n(const char *name, int npages) {
  void *pages[NPAGES];
  int status[NPAGES];
  long sum = 0;
  for (int i = 0; i < npages; i++) pages[i] = arr + (size_t)i * PAGE;
  if (syscall(SYS_move_pages, 0, npages, pages, NULL, status, 0) != 0) {
    perror("move_pages");
    exit(1);
  }
  for (int i = 0; i < npages; i++) sum += arr[(size_t)i * PAGE + 7];
  printf("POLICY %s:", name);
  for (int i = 0; i < npages; i++) printf(" %d", status[i]);
  printf("\nDATA %s %ld\nMIGRATED %s %lld\n", name, sum, name, (long long)numaff_migrated_pages());
}

static void show(const char *name) { show_n(name, NPAGES); }

static const char *round_name = "THREAD";

static void *worker(void *p) {
  int t = (int)(intptr_t)p;
  int rc = numaff_bind_thread(t);
  unsigned cpu = 0, node = 0;
  syscall(SYS_getcpu, &cpu, &node, NULL);
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  printf("%s %d rc %d cpu %u node %u predicted %d allowed %d\n", round_name, t, rc, cpu, node,
         numaff_thread_node(t), CPU_COUNT(&set));
  return NULL;
}

static void run_threads(const char *name, int nthreads) {
  pthread_t th[64];
  round_name = name;
  for (int t = 0; t < nthreads && t < 64; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
  for (int t = 0; t < nthreads && t < 64; t++) pthread_join(th[t], NULL);
}

int main(void) {
  check(numaff_init(), "init");
  int m = numaff_node_count();
  int nodes[64];
  numaff_nodes(nodes, 64);
  printf("NODES %d:", m);
  for (int i = 0; i < m; i++) printf(" %d", nodes[i]);
  printf("\nCPUS %d\n", numaff_cpu_count());

  arr = numaff_alloc_1d(NPAGES, PAGE);
  if (!arr) check(-99, "alloc");
  check(numaff_cyclic(arr), "cyclic"); /* fresh array: pages faulted in on their nodes */
  for (int i = 0; i < NPAGES; i++) arr[(size_t)i * PAGE + 7] = (char)(i % 100);
  show("cyclic");
  check(numaff_skew_mapp(arr), "skew_mapp"); /* policy change: pages move */
  show("skew_mapp");
  check(numaff_prime_mapp(arr), "prime_mapp");
  show("prime_mapp");
  check(numaff_cyclic_block(arr, 3), "cyclic_block");
  show("cyclic_block3");
  check(numaff_set_seed(42), "seed");
  check(numaff_random(arr), "random");
  show("random42");
  check(numaff_random_block(arr, 4), "random_block");
  show("random_block4");
  int last = nodes[m - 1];
  check(numaff_bind_all(arr, &last, 1), "bind_all");
  show("bind_all_last");
  check(numaff_migrate(arr, 8, 8, &nodes[0], 1), "migrate");
  show("migrate_8_16_first");
  /* bind_all over two nodes, the last first: the array fits, so all of it on the last. */
  int two[2] = {nodes[m - 1], nodes[0]};
  check(numaff_bind_all(arr, two, 2), "bind_all two");
  show("bind_all_last_first");

  /* bind_block: one block per thread on its thread's node; the threads pin themselves. */
  int nthreads = numaff_cpu_count();
  check(numaff_set_threads(nthreads), "set_threads");
  check(numaff_bind_block(arr), "bind_block");
  show("bind_block");
  run_threads("THREAD", nthreads);
  check(numaff_cyclic_block(arr, 0), "cyclic_block auto");
  show("cyclic_block_auto");

  /* The user's mapping: thread t on the (n-1-t)-th cpu; bind_block follows it. */
  int cpus[64];
  for (int t = 0; t < nthreads && t < 64; t++) cpus[t] = nthreads - 1 - t;
  check(numaff_set_thread_cpus(cpus, nthreads), "set_thread_cpus");
  check(numaff_bind_block(arr), "bind_block user");
  show("bind_block_user");
  run_threads("UTHREAD", nthreads);
  /* The OS schedule: numaff_bind_thread pins nothing (every cpu stays allowed). */
  check(numaff_set_sched(NUMAFF_SCHED_OS), "sched os");
  run_threads("OSTHREAD", nthreads);
  check(numaff_set_sched(NUMAFF_SCHED_PIN), "sched pin");

  /* Columns of a 2-D array: 8 rows of 2048 doubles (4 pages per row), cyclic, then columns
   * 512.. (pages 1-3 of each row) to the last node and the first, in two parts. */
  double(*g)[2048] = numaff_alloc_2d(8, 2048, sizeof(double));
  if (!g) check(-99, "alloc_2d");
  check(numaff_cyclic(g), "cyclic 2d");
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 2048; c += 512) g[r][c] = r + c;
  check(numaff_migrate_cols(g, 512, 0, two, 2), "migrate_cols");
  arr = (char *)g;
  show_n("migrate_cols_512", 32);
  long gsum = 0;
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 2048; c += 512) gsum += (long)g[r][c];
  printf("GSUM %ld\n", gsum);

  /* A second, fresh array placed by skew_mapp directly (populate path, not migration). */
  char *b = numaff_alloc_1d(NPAGES, PAGE);
  check(numaff_skew_mapp(b), "skew_mapp fresh");
  arr = b;
  show("skew_mapp_fresh");

  fflush(stdout);
  check(numaff_print_stats(), "print_stats");
  check(numaff_final(), "final");
  printf("DONE\n");
  return 0;
}
