/* A memory-bound program for the overhead of `numaff profile`: 2 threads (argv[3], 1 to 64), each
 * first-touches its own 256 MiB buffer, then streams over it (read-modify-write) PASSES times
 * (argv[1], default 8).
 * With argv[2] (a file name; "" for none), the run goes on after the PASSES: it prints "DONE <unix
 * time>" when all threads have done them, keeps streaming until that file exists, so that programs
 * measured side by side (scripts/profile-overhead-side.sh) share the machine alike until the
 * slowest is done, and prints "EXIT <unix time>" as it returns. argv[4], if given, adds that many
 * microseconds of cpu-only work (no memory traffic) to each pass: a known overhead, to calibrate
 * what the side-by-side measurement reports for it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_NT 64
#define SZ (256UL << 20)
static int PASSES = 8;
static int NT = 2;
static long SPIN_US; /* cpu-only work per pass */
static const char *LINGER; /* keep streaming until this file exists */
static pthread_barrier_t done;

/* Burns `us` microseconds of this thread's cpu time without touching memory. */
static void spin(long us) {
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void *work(void *arg) {
    (void)arg;
    long *b = mmap(NULL, SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { perror("mmap"); exit(1); }
    madvise(b, SZ, MADV_NOHUGEPAGE);
    size_t n = SZ / sizeof(long);
    for (size_t i = 0; i < n; i++) b[i] = (long)i;
    long s = 0;
    for (int p = 0; p < PASSES; p++) {
        for (size_t i = 0; i < n; i++) { b[i] += p; s += b[i]; }
        if (SPIN_US) spin(SPIN_US);
    }
    if (LINGER) {
        if (pthread_barrier_wait(&done) == PTHREAD_BARRIER_SERIAL_THREAD) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            printf("DONE %ld.%09ld\n", (long)t.tv_sec, t.tv_nsec);
            fflush(stdout);
        }
        for (int p = 0; access(LINGER, F_OK) != 0; p++) {
            for (size_t i = 0; i < n; i++) { b[i] += p; s += b[i]; }
            if (SPIN_US) spin(SPIN_US);
        }
    }
    munmap(b, SZ);
    return (void *)s;
}

int main(int argc, char **argv) {
    if (argc > 1) PASSES = atoi(argv[1]);
    if (argc > 2 && argv[2][0]) LINGER = argv[2];
    if (argc > 3) NT = atoi(argv[3]);
    if (argc > 4) SPIN_US = atol(argv[4]);
    if (NT < 1 || NT > MAX_NT) { fprintf(stderr, "membound: threads must be 1 to %d\n", MAX_NT); return 2; }
    pthread_barrier_init(&done, NULL, NT);
    pthread_t t[MAX_NT];
    long sum = 0;
    for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < NT; i++) { void *r; pthread_join(t[i], &r); sum += (long)r; }
    printf("%ld\n", sum);
    if (LINGER) {
        struct timespec e;
        clock_gettime(CLOCK_REALTIME, &e);
        printf("EXIT %ld.%09ld\n", (long)e.tv_sec, e.tv_nsec);
    }
    return 0;
}
