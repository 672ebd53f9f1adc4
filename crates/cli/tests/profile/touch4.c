/* 4 threads each touch their own 16 MiB buffer (one write per 4 KiB page), without THP.
 * Prints "BUF tid start end" per thread to stdout for the test to check addresses. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NT 4
#define SZ (16UL << 20)

static void *work(void *arg) {
    (void)arg;
    char *b = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { perror("mmap"); exit(1); }
    madvise(b, SZ, MADV_NOHUGEPAGE);
    for (unsigned long i = 0; i < SZ; i += 4096) b[i] = (char)i;
    printf("BUF %ld %lu %lu\n", (long)syscall(SYS_gettid), (unsigned long)b, (unsigned long)b + SZ);
    fflush(stdout);
    return NULL;
}

int main(void) {
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    return 0;
}
