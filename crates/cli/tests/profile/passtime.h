/* Shared by the in-process fault-cost programs (selfrearm.c, hintcost.c): a monotonic clock in
 * seconds, the process's minor faults so far (getrusage), and a qsort comparison of doubles. */
#ifndef NUMAFF_PASSTIME_H
#define NUMAFF_PASSTIME_H
#include <sys/resource.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static long minflt(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
#endif
