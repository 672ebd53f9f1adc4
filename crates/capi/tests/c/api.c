/* libnumaff's C API on the host (any node count): errors are codes, never aborts; the calls work. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <numaff.h>

static int failures = 0;
#define EXPECT(cond)                                                                 \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      printf("FAILED line %d: %s (last error: %s)\n", __LINE__, #cond, numaff_last_error()); \
      failures++;                                                                    \
    }                                                                                \
  } while (0)

int main(void) {
  /* Before init: every call reports NUMAFF_ENOTINIT, allocation gives NULL. */
  EXPECT(numaff_alloc_1d(10, 8) == NULL);
  EXPECT(strstr(numaff_last_error(), "numaff_init") != NULL);
  EXPECT(numaff_cyclic((void *)4096) == NUMAFF_ENOTINIT);
  EXPECT(numaff_final() == NUMAFF_ENOTINIT);
  EXPECT(strcmp(numaff_strerror(NUMAFF_ENOARRAY), "not an array allocated by numaff_alloc_*") == 0);
  EXPECT(strcmp(numaff_strerror(12345), "unknown error code") == 0);
  EXPECT(strcmp(numaff_version(), "0.1.0") == 0);
  {
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", NUMAFF_VERSION_MAJOR, NUMAFF_VERSION_MINOR, NUMAFF_VERSION_PATCH);
    EXPECT(strcmp(numaff_version(), v) == 0); /* the header's macros match the library */
  }
  /* Every code has its own text. */
  for (int e = NUMAFF_OK; e >= NUMAFF_EINTERNAL; e--)
    for (int f = e - 1; f >= NUMAFF_EINTERNAL; f--) EXPECT(strcmp(numaff_strerror(e), numaff_strerror(f)) != 0);

  EXPECT(numaff_init() == 0);
  EXPECT(numaff_init() == 0); /* counted */
  int m = numaff_node_count();
  EXPECT(m >= 1);
  EXPECT(numaff_cpu_count() >= 1);

  EXPECT(numaff_alloc_1d(0, 8) == NULL);
  EXPECT(numaff_alloc_2d(SIZE_MAX / 2, 4, 8) == NULL);
  EXPECT(numaff_cyclic(NULL) == NUMAFF_EINVAL);
  int x;
  EXPECT(numaff_cyclic(&x) == NUMAFF_ENOARRAY);

  int bad = 4242;
  double *a = numaff_alloc_1d(100000, sizeof(double));
  double(*b)[300] = numaff_alloc_2d(200, 300, sizeof(double));
  float(*c)[20][30] = numaff_alloc_3d(10, 20, 30, sizeof(float));
  EXPECT(a && b && c);
  EXPECT(((uintptr_t)a & 4095) == 0);
  EXPECT(numaff_pages_on_node(a, -1) == 196); /* nothing placed yet: all absent */
  EXPECT(numaff_cyclic(a) == 0);
  EXPECT(numaff_pages_on_node(a, -1) == 0);
  for (int i = 0; i < 100000; i++) a[i] = i;
  EXPECT(numaff_skew_mapp(a) == 0);
  EXPECT(numaff_prime_mapp(a) == 0);
  EXPECT(numaff_bind_block(a) == 0);
  EXPECT(numaff_cyclic_block(a, 1000) == 0);
  EXPECT(numaff_random(a) == 0);
  EXPECT(numaff_random_block(a, 0) == 0);
  EXPECT(numaff_bind_all(a, NULL, 0) == 0);
  double s = 0;
  for (int i = 0; i < 100000; i++) s += a[i];
  EXPECT(s == 4999950000.0); /* contents survive every re-placement */

  EXPECT(numaff_bind_all(a, &bad, 1) == NUMAFF_ENODE);
  EXPECT(strstr(numaff_last_error(), "4242") != NULL);
  EXPECT(numaff_bind_all(a, NULL, 3) == NUMAFF_EINVAL);
  EXPECT(numaff_migrate(a, 0, 0, NULL, 0) == NUMAFF_EINVAL);
  int n0;
  numaff_nodes(&n0, 1);
  EXPECT(numaff_migrate(a, 100000, 1, &n0, 1) == NUMAFF_EINVAL);
  EXPECT(numaff_migrate(a, 50000, 0, &n0, 1) == 0);
  EXPECT(numaff_pages_on_node(a, n0) >= 98);
  EXPECT(numaff_migrate(a, 0, SIZE_MAX, &n0, 1) == 0); /* nrows past the end: to the end */
  EXPECT(numaff_pages_on_node(a, n0) == 196);            /* the whole array */
  EXPECT(numaff_migrate_cols(a, 0, 0, &n0, 1) == NUMAFF_EINVAL); /* 1-D: no columns */
  EXPECT(strstr(numaff_last_error(), "1-D") != NULL);
  EXPECT(numaff_migrate_cols(b, 300, 1, &n0, 1) == NUMAFF_EINVAL);
  EXPECT(numaff_migrate_cols(b, 0, 1, &bad, 1) == NUMAFF_ENODE);
  EXPECT(numaff_migrate_cols(b, 0, 1, NULL, 0) == NUMAFF_EINVAL);
  EXPECT(numaff_migrate_cols(b, 100, 0, &n0, 1) == 0);
  EXPECT(numaff_migrate_cols(c, 5, SIZE_MAX, &n0, 1) == 0);

  b[199][299] = 1.5;
  c[9][19][29] = 2.5f;
  EXPECT(numaff_bind_block(b) == 0 && numaff_cyclic(c) == 0);
  EXPECT(b[199][299] == 1.5 && c[9][19][29] == 2.5f);

  EXPECT(numaff_set_sched(7) == NUMAFF_EINVAL);
  EXPECT(numaff_set_threads(-1) == NUMAFF_EINVAL);
  int cpu_bad = 100000;
  EXPECT(numaff_set_thread_cpus(&cpu_bad, 1) == NUMAFF_ENODE);
  EXPECT(numaff_set_sched(NUMAFF_SCHED_OS) == 0);
  EXPECT(numaff_bind_thread(0) == 0);
  EXPECT(numaff_set_sched(NUMAFF_SCHED_PIN) == 0);
  EXPECT(numaff_bind_thread(0) == 0);
  EXPECT(numaff_thread_node(0) >= 0);
  EXPECT(numaff_migrated_pages() >= 0);
  EXPECT(numaff_print_stats() == 0);

  EXPECT(numaff_free(b) == 0);
  EXPECT(numaff_free(b) == NUMAFF_ENOARRAY);
  EXPECT(numaff_free(c) == 0);
  EXPECT(numaff_final() == 0);
  EXPECT(numaff_final() == 0);
  EXPECT(numaff_final() == NUMAFF_ENOTINIT);
  EXPECT(a[99999] == 99999.0); /* arrays not freed stay usable after final */
  printf("api: %d failures\n", failures);
  return failures != 0;
}
