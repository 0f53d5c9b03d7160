/* test_backends.c -- the notifier back-ends against the contract of notifier.h, one case per run, with
 * the failures a real system rarely gives on demand made on demand: malloc and io_uring_submit are
 * wrapped (-Wl,--wrap=malloc,--wrap=io_uring_submit) and fail while a case asks them to.
 *
 *   test_backends write NAME   write interest: a descriptor armed with arm_write is reported once it can
 *                              take data, and not for data that arrives meanwhile; rearm() gives its read
 *                              interest back.  Prints "ok".
 *   test_backends poll-leak    a poll notifier whose allocation fails leaves no descriptor open.
 *   test_backends uring-submit an arm whose submission fails (a waiter blocked, so it is submitted at
 *                              once) still stands: arm() says so, and the next submission takes it in.
 *   test_backends uring-full   a full submission queue whose submission fails: arm() fails at once, with
 *                              nothing of it queued (before, it retried for good under the lock).
 *
 * Any case that hangs is ended by a 5 s alarm. */
#include "notifier.h"

#include <dirent.h>
#include <errno.h>
#include <liburing.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static atomic_int fail_mallocs, fail_submits;

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n)
{
    if (atomic_load(&fail_mallocs) > 0)
        return NULL;
    return __real_malloc(n);
}

int __real_io_uring_submit(struct io_uring *ring);
int __wrap_io_uring_submit(struct io_uring *ring)
{
    if (atomic_load(&fail_submits) > 0) {
        atomic_fetch_sub(&fail_submits, 1);
        return -EBUSY;
    }
    return __real_io_uring_submit(ring);
}

#define FAIL(...)                                                                                           \
    do {                                                                                                    \
        fprintf(stderr, __VA_ARGS__);                                                                       \
        fputc('\n', stderr);                                                                                \
        exit(1);                                                                                            \
    } while (0)

static const struct notifier_ops *find(const char *name)
{
    int id = notifier_find(name);
    if (id < 0 || notifier_kinds[id].ops == NULL)
        FAIL("no readiness notifier '%s'", name);
    return notifier_kinds[id].ops;
}

static struct notifier *make(const struct notifier_ops *ops)
{
    struct notifier_env env = {.maxfd = 1024, .lock = NULL};
    struct notifier *nt = ops->create(&env);
    if (nt == NULL)
        FAIL("cannot create the notifier");
    return nt;
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* How many times fd is reported by non-blocking waits over `ms` ms. */
static int reports(struct notifier *nt, int fd, int ms)
{
    int seen = 0, fds[MAX_EVENTS];
    for (int waited = 0; waited <= ms; waited += 5) {
        int n = nt->ops->wait(nt, fds, MAX_EVENTS, false);
        if (n < 0)
            FAIL("wait failed");
        for (int i = 0; i < n; i++)
            seen += fds[i] == fd;
        nap_ms(5);
    }
    return seen;
}

/* Until fd is reported (at most 2 s); false if it never is. */
static bool reported(struct notifier *nt, int fd)
{
    int fds[MAX_EVENTS];
    for (int waited = 0; waited < 2000; waited += 5) {
        int n = nt->ops->wait(nt, fds, MAX_EVENTS, false);
        if (n < 0)
            FAIL("wait failed");
        for (int i = 0; i < n; i++)
            if (fds[i] == fd)
                return true;
        nap_ms(5);
    }
    return false;
}

static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

static void fill(int fd)
{
    static char buf[65536];
    while (write(fd, buf, sizeof(buf)) > 0) {
    }
    while (write(fd, buf, 1) > 0) {
    }
}

static void case_write(const char *name)
{
    const struct notifier_ops *ops = find(name);
    struct notifier *nt = make(ops);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
        FAIL("socketpair: %s", strerror(errno));
    int a = sv[0], b = sv[1];
    if (ops->add(nt, a) < 0)
        FAIL("add");
    /* A message arrives: reported for reading, deactivated (edge: reported once). */
    if (write(b, "x", 1) != 1)
        FAIL("write");
    if (!reported(nt, a))
        FAIL("%s: a readable descriptor was not reported", name);
    drain(a);
    /* Its reply does not fit: armed for writability, not reported while the socket is full, nor for
     * data that arrives meanwhile (read interest is off while it waits). */
    fill(a);
    if (ops->arm_write(nt, a) < 0)
        FAIL("arm_write");
    if (write(b, "y", 1) != 1)
        FAIL("write");
    int n = reports(nt, a, 50);
    if (n != 0)
        FAIL("%s: a full descriptor armed for writability was reported %d times", name, n);
    /* The peer reads: it can take data, and is reported once. */
    drain(b);
    if (!reported(nt, a))
        FAIL("%s: a writable descriptor armed with arm_write was not reported", name);
    n = reports(nt, a, 50);
    if (n != 0)
        FAIL("%s: reported %d more times after its writability report", name, n);
    /* Read interest back: the byte that came while it waited is reported. */
    if (ops->rearm(nt, a) < 0)
        FAIL("rearm");
    if (!reported(nt, a))
        FAIL("%s: rearm after arm_write did not report the data that came meanwhile", name);
    ops->del(nt, a);
    ops->destroy(nt);
    close(a);
    close(b);
    puts("ok");
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        FAIL("opendir /proc/self/fd");
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static void case_poll_leak(void)
{
    const struct notifier_ops *ops = find("poll");
    int before = open_fds();
    struct notifier_env env = {.maxfd = 1024, .lock = NULL};
    atomic_store(&fail_mallocs, 1);
    struct notifier *nt = ops->create(&env);
    atomic_store(&fail_mallocs, 0);
    if (nt != NULL)
        FAIL("poll: create succeeded with malloc failing");
    int after = open_fds();
    if (after != before)
        FAIL("poll: a failed create left %d descriptors open", after - before);
    puts("ok");
}

struct waiter {
    struct notifier *nt;
    int fd;
    atomic_bool seen, stop;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    int fds[MAX_EVENTS];
    while (!atomic_load(&w->stop)) {
        int n = w->nt->ops->wait(w->nt, fds, MAX_EVENTS, true);
        for (int i = 0; i < n; i++)
            if (fds[i] == w->fd)
                atomic_store(&w->seen, true);
    }
    return NULL;
}

static void case_uring_submit(void)
{
    const struct notifier_ops *ops = find("uring");
    struct notifier *nt = make(ops);
    int idle = eventfd(0, EFD_NONBLOCK), ready = eventfd(1, EFD_NONBLOCK);
    if (idle < 0 || ready < 0 || ops->add(nt, idle) < 0)
        FAIL("setup");
    struct waiter w = {.nt = nt, .fd = ready};
    pthread_t tid;
    pthread_create(&tid, NULL, waiter_main, &w);
    nap_ms(100); /* the waiter is blocked in wait(): an arm is submitted at once */
    atomic_store(&fail_submits, 1);
    if (ops->rearm(nt, ready) < 0)
        FAIL("uring: an arm whose submission failed was reported failed (its poll stays queued)");
    if (atomic_load(&fail_submits) != 0)
        FAIL("uring: the arm was not submitted at once");
    /* The next submission (here a wake's) takes the queued poll in; it completes, and is reported. */
    ops->wake(nt);
    for (int i = 0; i < 400 && !atomic_load(&w.seen); i++) {
        nap_ms(5);
        ops->wake(nt);
    }
    if (!atomic_load(&w.seen))
        FAIL("uring: the arm whose submission failed never reached the kernel");
    atomic_store(&w.stop, true);
    ops->wake(nt);
    pthread_join(tid, NULL);
    ops->destroy(nt);
    puts("ok");
}

static void case_uring_full(void)
{
    const struct notifier_ops *ops = find("uring");
    struct notifier *nt = make(ops);
    int ready = eventfd(1, EFD_NONBLOCK);
    if (ready < 0)
        FAIL("eventfd");
    /* No waiter: arms are queued for the next wait, until the submission queue is full. */
    int queued = 0;
    atomic_store(&fail_submits, 1 << 30);
    for (; queued < 100000; queued++)
        if (ops->add(nt, ready) < 0)
            break;
    atomic_store(&fail_submits, 0);
    if (queued == 100000)
        FAIL("uring: 100000 arms queued with every submission failing");
    /* Everything that was queued is submitted by the next waits and completes; the refused arm is not
     * among them. */
    int got = 0, fds[MAX_EVENTS];
    for (int i = 0; i < 400 && got < queued; i++) {
        int n = ops->wait(nt, fds, MAX_EVENTS, false);
        if (n < 0)
            FAIL("wait failed");
        got += n;
        if (n == 0)
            nap_ms(5);
    }
    got += reports(nt, ready, 50);
    if (got != queued)
        FAIL("uring: %d arms queued, %d reported", queued, got);
    ops->destroy(nt);
    printf("ok %d\n", queued);
}

int main(int argc, char **argv)
{
    alarm(5);
    if (argc == 3 && strcmp(argv[1], "write") == 0)
        case_write(argv[2]);
    else if (argc == 2 && strcmp(argv[1], "poll-leak") == 0)
        case_poll_leak();
    else if (argc == 2 && strcmp(argv[1], "uring-submit") == 0)
        case_uring_submit();
    else if (argc == 2 && strcmp(argv[1], "uring-full") == 0)
        case_uring_full();
    else
        FAIL("usage: test_backends write NAME | poll-leak | uring-submit | uring-full");
    return 0;
}
