/* A known communication pattern: 8 threads in a ring, thread i writes its buffer and
 * thread i+1 reads it, round after round (argv[1] milliseconds in all, default 1500).
 * The buffers are shared memory (MAP_SHARED | MAP_ANONYMOUS, 16 pages each), where induced faults
 * catch reads as well as writes (numaff's uffd agent unmaps shared pages; private pages can be
 * re-armed for writes only). Prints "THREAD i tid" and "BUF i start end" for the test. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NT 8
#define PAGES 16
static size_t LEN;
static char *buf[NT];
static pthread_barrier_t bar, start;
static volatile int stop;
static int quit; /* stop as seen by the round: written by one thread between two barriers */
static long sums[NT];

static void *work(void *arg) {
    int i = (int)(long)arg, from = (i + NT - 1) % NT;
    printf("THREAD %d %ld\n", i, (long)syscall(SYS_gettid));
    fflush(stdout);
    pthread_barrier_wait(&start);
    long s = 0;
    for (unsigned round = 1;; round++) {
        memset(buf[i], (int)(round & 0xff), LEN);
        if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD) quit = stop;
        for (size_t k = 0; k < LEN; k += 64) s += buf[from][k];
        pthread_barrier_wait(&bar);
        if (quit) break;
    }
    sums[i] = s;
    return NULL;
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 1500;
    LEN = PAGES * (size_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < NT; i++) {
        buf[i] = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (buf[i] == MAP_FAILED) { perror("mmap"); return 2; }
        printf("BUF %d %lu %lu\n", i, (unsigned long)buf[i], (unsigned long)(buf[i] + LEN));
    }
    pthread_barrier_init(&bar, NULL, NT);
    pthread_barrier_init(&start, NULL, NT + 1);
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) pthread_create(&t[i], NULL, work, (void *)(long)i);
    pthread_barrier_wait(&start);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    stop = 1;
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    long total = 0;
    for (int i = 0; i < NT; i++) total += sums[i];
    printf("SUM %ld\n", total);
    return 0;
}
