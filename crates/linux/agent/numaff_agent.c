/* numaff's in-process agent for induced page faults (kMAF §4.2.2 without a kernel module), loaded
 * with LD_PRELOAD by `numaff profile --induce uffd`.
 *
 * Every tick it re-arms a share of the program's pages so that their next access faults again and
 * the page-fault sampler sees which thread touched them:
 *  - private anonymous memory (heap, anonymous mmap): write-protected through userfaultfd in
 *    asynchronous mode (UFFD_FEATURE_WP_ASYNC, Linux >= 6.7): the kernel itself resolves the next
 *    write, for user and kernel accesses alike, so no thread ever blocks on the agent, no system
 *    call gets EFAULT and no signal handler is involved. Reads of these pages are not seen.
 *  - shared memory (MAP_SHARED anonymous, memfd, /dev/shm, SysV): unmapped with MADV_DONTNEED,
 *    which keeps the data in the page cache; the next read or write maps it back (a minor fault).
 * The agent never touches the program's data, installs no signal handler, blocks every signal in
 * its own thread, and does nothing at all (silently) when NUMAFF_INDUCE_RATE is unset or a step
 * fails. Within NUMAFF_INDUCE_BUDGET (a share of the program's cpu time; 0 or unset: no cap) it
 * re-arms fewer pages than the rate asks. It reports what it did to $NUMAFF_INDUCE_STATUS.<pid> (one line, rewritten every tick).
 * The line names the agent's thread (tid=, its name is numaff-agent), which numaff leaves out of
 * the trace: it is no task of the program.
 * When numaff (pid $NUMAFF_INDUCE_OWNER) is gone, the agent stops re-arming and removes its status
 * file: pages armed before are resolved by the kernel as usual, the program runs on unchanged. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

#define MAX_RANGES 4096
#define MAPS_BYTES (1 << 20)

struct range {
    uintptr_t start, end;
    int shared;
};

static struct {
    int uffd;          /* -1: no write re-arming of private memory */
    int user_mode_only;
    double rate;       /* re-arms per page per second */
    double budget;     /* share of the program's cpu time induced faults may cost; 0: no cap */
    double fault_ns;   /* cost of one induced fault assumed by the budget */
    double credit_ns;  /* the budget's account (induce.rs, InduceBudget: the same rules) */
    double last_process_ns, last_agent_ns;
    long tick_ms;
    int status_fd;
    pid_t owner;       /* numaff's pid: the agent stops when it is gone; 0: no check */
    char status_path[4096];
    uint64_t cursor;   /* page index where the next tick starts, over all eligible pages */
    uint64_t ticks, private_pages, shared_pages, errors, eligible_pages, wanted, limited_ticks;
    uint64_t vanished; /* calls on a range the program unmapped since the tick read its maps */
    const char *last_call; /* the last failed call (an error, not a vanished range) and its errno */
    int last_errno;
    const char *why;   /* why private memory is not re-armed, or NULL */
    pid_t tid;         /* the agent thread's tid, once it runs (atomic); 0 before */
    sem_t running;     /* posted by the agent thread once tid is set */
} A = {.uffd = -1, .status_fd = -1};

/* Zero-initialised (in .bss, not in the file). */
static char maps[MAPS_BYTES];
static struct range ranges[MAX_RANGES];

static long page_size;

static double cpu_ns(clockid_t clock) {
    struct timespec t;
    if (clock_gettime(clock, &t) != 0)
        return 0.0;
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void status(const char *state) {
    if (A.status_fd < 0)
        return;
    char line[512];
    int n = snprintf(line, sizeof line,
                     "state=%s uffd=%s ticks=%llu eligible_pages=%llu private_rearmed=%llu "
                     "shared_rearmed=%llu errors=%llu vanished=%llu wanted=%llu limited_ticks=%llu budget=%g "
                     "agent_cpu_ms=%.3f last_error=%s:%d rate=%g tick_ms=%ld private=%s tid=%ld\n",
                     state, A.uffd >= 0 ? (A.user_mode_only ? "user-mode-only" : "full") : "none",
                     (unsigned long long)A.ticks, (unsigned long long)A.eligible_pages,
                     (unsigned long long)A.private_pages, (unsigned long long)A.shared_pages,
                     (unsigned long long)A.errors, (unsigned long long)A.vanished,
                     (unsigned long long)A.wanted,
                     (unsigned long long)A.limited_ticks, A.budget,
                     cpu_ns(CLOCK_THREAD_CPUTIME_ID) / 1e6, A.last_call ? A.last_call : "none",
                     A.last_errno, A.rate, A.tick_ms,
                     A.why ? A.why : "write-protect", (long)__atomic_load_n(&A.tid, __ATOMIC_ACQUIRE));
    /* One write of the same length every time, padded with spaces, never a truncation first: the
     * program may exit (killing this thread) between any two calls, and numaff reads the file
     * after that; a write within one page is done whole or not at all. */
    if (n > 0 && n < (int)sizeof line) {
        memset(line + n - 1, ' ', sizeof line - (size_t)n);
        line[sizeof line - 1] = '\n';
        if (pwrite(A.status_fd, line, sizeof line, 0) < 0) { /* nothing to do */ }
    }
}

/* userfaultfd with asynchronous write-protection, or -1 (and A.why). */
static int open_uffd(void) {
    /* NUMAFF_INDUCE_USER_MODE_ONLY=1 asks for what an unprivileged user gets (for tests). */
    const char *umo = getenv("NUMAFF_INDUCE_USER_MODE_ONLY");
    int fd = -1;
    errno = EPERM;
    if (!(umo && strcmp(umo, "1") == 0))
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && (errno == EPERM || errno == EACCES)) {
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
        A.user_mode_only = fd >= 0;
    }
    if (fd < 0) {
        A.why = errno == ENOSYS ? "no-userfaultfd" : "userfaultfd-refused";
        return -1;
    }
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        A.why = "no-async-write-protect(linux<6.7)";
        close(fd);
        return -1;
    }
    return fd;
}

static int eligible_shared(const char *path) {
    return strncmp(path, "/dev/zero", 9) == 0 || strncmp(path, "/SYSV", 5) == 0 ||
           strncmp(path, "/memfd:", 7) == 0 || strncmp(path, "/dev/shm/", 9) == 0;
}

/* The eligible mappings of /proc/self/maps into ranges; returns their count. */
static int read_ranges(void) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t r;
    while (len < MAPS_BYTES - 1 && (r = read(fd, maps + len, MAPS_BYTES - 1 - len)) > 0)
        len += (size_t)r;
    close(fd);
    maps[len] = 0;
    int n = 0;
    char *line = maps;
    while (*line && n < MAX_RANGES) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        unsigned long s, e;
        char perms[8] = {0};
        int off = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &s, &e, perms, &off) >= 3) {
            const char *path = off > 0 ? line + off : "";
            while (*path == ' ')
                path++;
            int priv = strcmp(perms, "rw-p") == 0 && (*path == 0 || strcmp(path, "[heap]") == 0);
            int shared = strcmp(perms, "rw-s") == 0 && eligible_shared(path);
            if ((priv && A.uffd >= 0) || shared) {
                ranges[n].start = s;
                ranges[n].end = e;
                ranges[n].shared = shared;
                n++;
            }
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    return n;
}

/* Whether [s, s + len) is still mapped whole: msync validates the range (ENOMEM where a part is
 * unmapped) and, with MS_ASYNC, writes nothing back. */
static int mapped(uintptr_t s, size_t len) {
    return msync((void *)s, len, MS_ASYNC) == 0 || errno != ENOMEM;
}

/* A failed call: on a range the program unmapped (wholly or in part) since /proc/self/maps was
 * read it is not an error, only counted: ENOENT from write-protection, ENOMEM from madvise or
 * registration, EINVAL from registration over a hole. */
static void failed(const char *call, uintptr_t s, size_t len) {
    int e = errno;
    if (e == ENOENT || e == ENOMEM || (e == EINVAL && !mapped(s, len))) {
        A.vanished++;
    } else {
        A.errors++;
        A.last_call = call;
        A.last_errno = e;
    }
}

static void rearm(uintptr_t s, uintptr_t e, int shared) {
    size_t pages = (e - s) / (size_t)page_size;
    if (shared) {
        if (madvise((void *)s, e - s, MADV_DONTNEED) == 0)
            A.shared_pages += pages;
        else
            failed("madvise", s, e - s);
        return;
    }
    struct uffdio_writeprotect wp = {.range = {.start = s, .len = e - s},
                                     .mode = UFFDIO_WRITEPROTECT_MODE_WP};
    if (ioctl(A.uffd, UFFDIO_WRITEPROTECT, &wp) == 0)
        A.private_pages += pages;
    else
        failed("write-protect", s, e - s);
}

/* The overhead budget's account, earning for this tick: the program's cpu time since the last
 * tick (the process's less the agent's) earns `budget` of itself, the agent's own cpu time is paid
 * from it. The same rules as numaff_linux::induce::InduceBudget::earn. */
static void earn(void) {
    double process = cpu_ns(CLOCK_PROCESS_CPUTIME_ID), self = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    double agent = self - A.last_agent_ns, program = process - A.last_process_ns - agent;
    A.last_process_ns = process;
    A.last_agent_ns = self;
    A.credit_ns += A.budget * (program > 0.0 ? program : 0.0) - (agent > 0.0 ? agent : 0.0);
}

static unsigned char resident[4096];

/* How many pages from `s` on (at most `pages`) the account pays for, spending it: each resident
 * page (mincore) costs `fault_ns`, the most it can cost before its next re-arm (one fault); a page
 * not in memory costs nothing (write-protecting or unmapping it makes no fault). When mincore
 * fails the pages count as resident. */
static uint64_t affordable(uintptr_t s, uint64_t pages) {
    uint64_t done = 0;
    while (done < pages) {
        uint64_t piece = pages - done < sizeof resident ? pages - done : sizeof resident;
        void *at = (void *)(s + (uintptr_t)(done * (uint64_t)page_size));
        int known = mincore(at, (size_t)(piece * (uint64_t)page_size), resident) == 0;
        for (uint64_t i = 0; i < piece; i++) {
            if (!known || (resident[i] & 1)) {
                if (A.credit_ns < A.fault_ns)
                    return done + i;
                A.credit_ns -= A.fault_ns;
            }
        }
        done += piece;
    }
    return pages;
}

static void tick(void) {
    if (A.budget > 0.0) {
        earn();
        /* Not even one fault affordable: not even /proc/self/maps is read (an idle program). */
        if (A.credit_ns < A.fault_ns) {
            A.limited_ticks++;
            return;
        }
    }
    int n = read_ranges();
    if (n < 0) {
        A.errors++;
        return;
    }
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        struct range *r = &ranges[i];
        if (!r->shared) {
            /* Registering again is harmless; new and grown mappings get registered. */
            struct uffdio_register reg = {.range = {.start = r->start, .len = r->end - r->start},
                                          .mode = UFFDIO_REGISTER_MODE_WP};
            if (ioctl(A.uffd, UFFDIO_REGISTER, &reg) != 0) {
                failed("register", r->start, r->end - r->start);
                r->end = r->start; /* not eligible this tick */
            }
        }
        total += (r->end - r->start) / (uint64_t)page_size;
    }
    A.eligible_pages = total;
    if (total == 0)
        return;
    double want = (double)total * A.rate * (double)A.tick_ms / 1000.0;
    uint64_t quota = want < 1.0 ? 1 : (uint64_t)want;
    if (quota > total)
        quota = total;
    A.wanted += quota;
    /* The account holds at most this tick's full re-arm: an idle program banks nothing. */
    if (A.credit_ns > (double)quota * A.fault_ns)
        A.credit_ns = (double)quota * A.fault_ns;
    uint64_t from = A.cursor % total, done = 0, base = 0;
    int limited = 0;
    /* Walk the window [from, from + quota) over the concatenated pages, wrapping once; with a
     * budget, stop where it runs out. */
    for (int pass = 0; pass < 2 && done < quota && !limited; pass++) {
        base = 0;
        for (int i = 0; i < n && done < quota && !limited; i++) {
            struct range *r = &ranges[i];
            uint64_t pages = (r->end - r->start) / (uint64_t)page_size;
            uint64_t lo = base, hi = base + pages;
            base = hi;
            uint64_t start = from > lo ? from : lo;
            if (start >= hi)
                continue;
            uint64_t take = hi - start;
            if (take > quota - done)
                take = quota - done;
            uintptr_t s = r->start + (uintptr_t)((start - lo) * (uint64_t)page_size);
            if (A.budget > 0.0) {
                uint64_t paid = affordable(s, take);
                limited = paid < take;
                take = paid;
            }
            if (take > 0)
                rearm(s, s + (uintptr_t)(take * (uint64_t)page_size), r->shared);
            done += take;
            from = start + take;
        }
        from = 0;
    }
    A.limited_ticks += (uint64_t)limited;
    A.cursor = (A.cursor + done) % total;
}

/* Whether numaff, who reads the samples these faults produce, has gone away. */
static int owner_gone(void) {
    return A.owner > 0 && kill(A.owner, 0) != 0 && errno == ESRCH;
}

static void *agent(void *arg) {
    (void)arg;
    /* Named and known before it touches any memory of its own, so that numaff can leave its
     * samples out of the trace. */
    prctl(PR_SET_NAME, "numaff-agent", 0, 0, 0);
    __atomic_store_n(&A.tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    sem_post(&A.running);
    struct timespec ts = {.tv_sec = A.tick_ms / 1000, .tv_nsec = (A.tick_ms % 1000) * 1000000L};
    for (;;) {
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        ts.tv_sec = A.tick_ms / 1000;
        ts.tv_nsec = (A.tick_ms % 1000) * 1000000L;
        if (owner_gone()) {
            if (A.status_fd >= 0) {
                unlink(A.status_path);
                close(A.status_fd);
                A.status_fd = -1;
            }
            return NULL;
        }
        tick();
        A.ticks++;
        status("on");
    }
    return NULL;
}

__attribute__((constructor)) static void numaff_agent_start(void) {
    const char *rate = getenv("NUMAFF_INDUCE_RATE");
    if (!rate)
        return;
    page_size = sysconf(_SC_PAGESIZE);
    if (page_size <= 0)
        return;
    A.rate = strtod(rate, NULL);
    const char *tick = getenv("NUMAFF_INDUCE_TICK_MS");
    A.tick_ms = tick ? strtol(tick, NULL, 10) : 100;
    if (A.tick_ms < 1 || A.tick_ms > 60000)
        A.tick_ms = 100;
    if (!(A.rate > 0.0))
        return;
    const char *budget = getenv("NUMAFF_INDUCE_BUDGET");
    A.budget = budget ? strtod(budget, NULL) : 0.0;
    if (!(A.budget > 0.0 && A.budget <= 1.0))
        A.budget = 0.0;
    const char *fault_ns = getenv("NUMAFF_INDUCE_FAULT_NS");
    A.fault_ns = fault_ns ? strtod(fault_ns, NULL) : 1700.0;
    if (!(A.fault_ns >= 1.0))
        A.fault_ns = 1700.0;
    /* The program's cpu time counts from here; the agent thread's from its start (0). */
    A.last_process_ns = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    const char *owner = getenv("NUMAFF_INDUCE_OWNER");
    A.owner = owner ? (pid_t)strtol(owner, NULL, 10) : 0;
    const char *st = getenv("NUMAFF_INDUCE_STATUS");
    if (st) {
        int n = snprintf(A.status_path, sizeof A.status_path, "%s.%ld", st, (long)getpid());
        if (n > 0 && n < (int)sizeof A.status_path)
            A.status_fd = open(A.status_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    }
    A.uffd = open_uffd();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t attr;
    int ok = sem_init(&A.running, 0, 0) == 0 && pthread_attr_init(&attr) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&t, &attr, agent, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ok) {
        /* The first status names the agent's thread: wait (a second at most) until it runs. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        while (sem_timedwait(&A.running, &until) != 0 && errno == EINTR) {
        }
        status("started");
    } else {
        status("off:no-thread");
    }
}
