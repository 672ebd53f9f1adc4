/* For the agent's "never break the program" test: for argv[1] milliseconds, rewrite a 4 MiB private
 * buffer and read(2) /dev/zero and a pipe into it (the kernel writes into pages the agent may have
 * write-protected). Exits 1 with the failing call's error if any call fails or comes short;
 * prints "OK rounds" otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define LEN (4UL << 20)

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 1000;
    char *b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { perror("mmap"); return 2; }
    int z = open("/dev/zero", O_RDONLY);
    int p[2];
    if (z < 0 || pipe(p) != 0) { perror("open"); return 2; }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long rounds = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms) break;
        for (size_t i = 0; i < LEN; i += 4096) b[i] = (char)rounds;
        ssize_t n = read(z, b, LEN);
        if (n != (ssize_t)LEN) { fprintf(stderr, "read /dev/zero: %zd (%s)\n", n, strerror(errno)); return 1; }
        for (size_t off = 0; off < LEN; off += 65536) {
            if (write(p[1], "0123456789abcdef", 16) != 16) { perror("write pipe"); return 1; }
            n = read(p[0], b + off + 4090, 16); /* across a page boundary */
            if (n != 16) { fprintf(stderr, "read pipe: %zd (%s)\n", n, strerror(errno)); return 1; }
        }
        rounds++;
    }
    printf("OK %ld\n", rounds);
    return 0;
}
