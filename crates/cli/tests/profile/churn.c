/* Maps, touches and unmaps private and shared buffers again and again for argv[1] ms (default
 * 1000), so that the uffd agent often re-arms a range the program has just unmapped (which must
 * not count as an error). Prints "ROUNDS n". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double ms = argc > 1 ? atof(argv[1]) : 1000.0, end = now() + ms / 1000.0;
    long rounds = 0;
    while (now() < end) {
        for (int k = 0; k < 16; k++) {
            size_t len = (size_t)(k + 1) << 16;
            int flags = (k & 1 ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS;
            char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
            if (b == MAP_FAILED) { perror("mmap"); return 2; }
            memset(b, k, len);
            munmap(b, len);
        }
        rounds++;
    }
    printf("ROUNDS %ld\n", rounds);
    return 0;
}
