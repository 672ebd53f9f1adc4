/* For the 2-node guest test of induced faults: two threads, pinned to argv[1] and argv[2]
 * (a cpu of node 0 and one of node 1), each rewrites its own buffer every round and half of a
 * buffer they share, for argv[3] milliseconds, with a barrier between rounds. 64 pages each,
 * private anonymous memory without transparent huge pages. Prints "BUF name start end".
 *
 * Which thread writes a shared page in a round is a hash of (round, page), so the first write to
 * a page after a re-arm comes from each node with a chance of at least 1/4, wherever the re-arm
 * lands: at worst one thread has written its pages of the round and the other has not, which then
 * writes its half at once and the other half is drawn again next round. Schemes that let the
 * re-arms' timing decide do not work: with no turns, single-threaded TCG runs one vCPU for a whole
 * slice and the thread that runs right after a re-arm writes every shared page first; with
 * whole-buffer turns by round parity, the re-arms can keep landing in one thread's turns. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGES 64
static size_t LEN, PAGE;
static char *own[2], *shared;
static int cpu[2];
static double end;
static pthread_barrier_t bar;
static int quit; /* written by one thread between two barriers, read by both after the second */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The thread (0 or 1) that writes shared page `page` in round `round`: splitmix64's finaliser. */
static int writer(unsigned round, size_t page) {
    unsigned long long x = (unsigned long long)round * PAGES + page + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return (int)((x ^ (x >> 31)) & 1);
}

static void *work(void *arg) {
    int i = (int)(long)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu[i], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) { perror("sched_setaffinity"); exit(2); }
    for (unsigned round = 1;; round++) {
        for (size_t k = 0; k < LEN; k += 512) ((volatile char *)own[i])[k] = (char)round;
        /* A thread writes its own words of the shared pages the hash gives it this round. */
        for (size_t p = 0; p < PAGES; p++)
            if (writer(round, p) == i)
                for (size_t k = (size_t)i * 8; k < PAGE; k += 512)
                    ((volatile char *)shared)[p * PAGE + k] = (char)round;
        if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD) quit = now() >= end;
        pthread_barrier_wait(&bar);
        if (quit) break;
    }
    return NULL;
}

static char *map(void) {
    char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(2); }
    madvise(p, LEN, MADV_NOHUGEPAGE);
    return p;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s CPU_NODE0 CPU_NODE1 MS\n", argv[0]); return 2; }
    cpu[0] = atoi(argv[1]);
    cpu[1] = atoi(argv[2]);
    end = now() + (double)atol(argv[3]) / 1000.0;
    pthread_barrier_init(&bar, NULL, 2);
    PAGE = (size_t)sysconf(_SC_PAGESIZE);
    LEN = PAGES * PAGE;
    own[0] = map();
    own[1] = map();
    shared = map();
    printf("BUF a %lu %lu\nBUF b %lu %lu\nBUF s %lu %lu\n", (unsigned long)own[0],
           (unsigned long)(own[0] + LEN), (unsigned long)own[1], (unsigned long)(own[1] + LEN),
           (unsigned long)shared, (unsigned long)(shared + LEN));
    fflush(stdout);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, (void *)(long)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    return 0;
}
