/* A memory-bound program for the overhead of `numaff profile`: 2 threads, each first-touches its
 * own 256 MiB buffer, then streams over it (read-modify-write) PASSES times (argv[1], default 8).
 * With argv[2] (a file name), the run goes on after the PASSES: it prints "DONE <unix time>" when
 * both threads have done them, then keeps streaming until that file exists, so that programs
 * measured side by side (scripts/profile-overhead-side.sh) share the machine alike until
 * the slowest is done. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NT 2
#define SZ (256UL << 20)
static int PASSES = 8;
static const char *LINGER; /* keep streaming until this file exists */
static pthread_barrier_t done;

static void *work(void *arg) {
    (void)arg;
    long *b = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { perror("mmap"); exit(1); }
    madvise(b, SZ, MADV_NOHUGEPAGE);
    size_t n = SZ / sizeof(long);
    for (size_t i = 0; i < n; i++) b[i] = (long)i;
    long s = 0;
    for (int p = 0; p < PASSES; p++)
        for (size_t i = 0; i < n; i++) { b[i] += p; s += b[i]; }
    if (LINGER) {
        if (pthread_barrier_wait(&done) == PTHREAD_BARRIER_SERIAL_THREAD) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            printf("DONE %ld.%09ld\n", (long)t.tv_sec, t.tv_nsec);
            fflush(stdout);
        }
        for (int p = 0; access(LINGER, F_OK) != 0; p++)
            for (size_t i = 0; i < n; i++) { b[i] += p; s += b[i]; }
    }
    munmap(b, SZ);
    return (void *)s;
}

int main(int argc, char **argv) {
    if (argc > 1) PASSES = atoi(argv[1]);
    if (argc > 2) LINGER = argv[2];
    pthread_barrier_init(&done, NULL, NT);
    pthread_t t[NT];
    long sum = 0;
    for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < NT; i++) { void *r; pthread_join(t[i], &r); sum += (long)r; }
    printf("%ld\n", sum);
    return 0;
}
