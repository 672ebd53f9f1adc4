/* bind_all over nodes {0, 1} of an array larger than node 0's free memory, in a 2-node guest
 * (tests/guest_placement.rs): the pages must fill node 0 first, in order, then go to node 1.
 * Prints FILL pages P node0 A node1 B other O last0 L first1 F (move_pages query, no libnumaff). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <numaff.h>

#define PAGE 4096L
#define CHUNK 4096

int main(int argc, char **argv) {
  long mib = argc > 1 ? atol(argv[1]) : 256;
  if (numaff_init() != 0) { printf("FAIL init: %s\n", numaff_last_error()); return 1; }
  long npages = mib * 256;
  char *a = numaff_alloc_1d((size_t)npages, PAGE);
  if (!a) { printf("FAIL alloc: %s\n", numaff_last_error()); return 1; }
  int nodes[2] = {0, 1};
  int rc = numaff_bind_all(a, nodes, 2);
  printf("BIND_ALL rc %d %s\n", rc, rc ? numaff_last_error() : "");
  long count[2] = {0, 0}, other = 0, last0 = -1, first1 = -1;
  static void *pages[CHUNK];
  static int status[CHUNK];
  for (long base = 0; base < npages; base += CHUNK) {
    long n = npages - base < CHUNK ? npages - base : CHUNK;
    for (long i = 0; i < n; i++) pages[i] = a + (base + i) * PAGE;
    if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0) { perror("move_pages"); return 1; }
    for (long i = 0; i < n; i++) {
      if (status[i] == 0) { count[0]++; last0 = base + i; }
      else if (status[i] == 1) { count[1]++; if (first1 < 0) first1 = base + i; }
      else other++;
    }
  }
  printf("FILL pages %ld node0 %ld node1 %ld other %ld last0 %ld first1 %ld\n", npages, count[0],
         count[1], other, last0, first1);
  fflush(stdout);
  numaff_print_stats();
  return numaff_final();
}
