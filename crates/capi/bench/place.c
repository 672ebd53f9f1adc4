/* Allocation + placement time of each libnumaff policy against mmap + first touch of the same size.
 * Build: gcc -O2 place.c $(pkg-config --cflags --libs numaff) -o place; run: ./place MIB */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <numaff.h>
static double now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc, char **argv){
  size_t mib = argc > 1 ? strtoul(argv[1],0,10) : 256, n = mib<<20;
  numaff_init();
  double t0 = now();
  char *m = mmap(0, n, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  madvise(m, n, MADV_NOHUGEPAGE);
  for (size_t i = 0; i < n; i += 4096) m[i] = 1;
  double touch = now() - t0; munmap(m, n);
  printf("first-touch %zu MiB: %.3f s\n", mib, touch);
  const char *names[] = {"cyclic","skew_mapp","prime_mapp","bind_block","random"};
  int (*fs[])(void*) = {numaff_cyclic,numaff_skew_mapp,numaff_prime_mapp,numaff_bind_block,numaff_random};
  for (int k = 0; k < 5; k++) {
    t0 = now(); char *a = numaff_alloc_1d(n, 1); int rc = fs[k](a); double t = now() - t0;
    printf("%-10s alloc+place: %.3f s (%.1fx first touch) rc %d\n", names[k], t, t/touch, rc);
    numaff_free(a);
  }
  return numaff_final();
}
