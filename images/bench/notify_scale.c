/* notify_scale.c -- cost of one notifier call against the number of watched
 * descriptors, with only a few of them ready (seed 004).
 *
 *   notify-scale --notifier select|poll|epoll|uring --fds N --active A [--iters K] [--cpu C]
 *
 * Watches N eventfds; A of them hold a count and so stay readable (nothing
 * consumes it), the rest stay idle.  Prints one JSON line:
 *   {"notifier": "poll", "fds": N, "active": A, "iters": K, "us_per_call": x, "ready_per_call": A}
 *
 * select and poll rescan every descriptor per call; epoll and io_uring keep the
 * interest set in the kernel, so their cost should follow A, not N.  For
 * io_uring a "call" re-arms the A one-shot polls that fired and waits for
 * their completions, while the N-A idle polls stay armed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include "util.h"

struct ctx {
    const char *notifier;
    int nfds, active, iters;
    int *fds;
    struct pollfd *pfds;
    int ep;
    struct io_uring ring;
    int ring_ok;
    struct epoll_event *events;
};

static void die(const char *what)
{
    fprintf(stderr, "notify-scale: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(const char *msg)
{
    fprintf(stderr, "notify-scale: %s\nusage: notify-scale --notifier select|poll|epoll|uring --fds N "
                    "--active A [--iters K] [--cpu C]\n", msg);
    exit(2);
}

static void open_fds(struct ctx *x)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)x->nfds + 32;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    x->fds = calloc((size_t)x->nfds, sizeof(int));
    x->pfds = calloc((size_t)x->nfds, sizeof(struct pollfd));
    x->events = calloc((size_t)x->nfds, sizeof(struct epoll_event));
    if (!x->fds || !x->pfds || !x->events)
        die("calloc");
    for (int i = 0; i < x->nfds; i++) {
        x->fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (x->fds[i] < 0)
            die("eventfd (raise ulimit -n)");
        x->pfds[i].fd = x->fds[i];
        x->pfds[i].events = POLLIN;
    }
    /* Spread the ready ones over the range so a scan cannot stop early. */
    for (int k = 0; k < x->active; k++) {
        uint64_t one = 1;
        int i = (int)((long)k * x->nfds / x->active);
        if (write(x->fds[i], &one, sizeof(one)) != sizeof(one))
            die("write eventfd");
    }
}

static int call_select(struct ctx *x)
{
    fd_set rd;
    struct timeval tv = {0, 0};
    int maxfd = -1;
    FD_ZERO(&rd);
    for (int i = 0; i < x->nfds; i++) {
        FD_SET(x->fds[i], &rd);
        if (x->fds[i] > maxfd)
            maxfd = x->fds[i];
    }
    return select(maxfd + 1, &rd, NULL, NULL, &tv);
}

static int call_poll(struct ctx *x) { return poll(x->pfds, (nfds_t)x->nfds, 0); }

static int call_epoll(struct ctx *x) { return epoll_wait(x->ep, x->events, x->nfds, 0); }

static void arm_uring(struct ctx *x, int i)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&x->ring);
    if (sqe == NULL) {
        io_uring_submit(&x->ring);
        sqe = io_uring_get_sqe(&x->ring);
    }
    io_uring_prep_poll_add(sqe, x->fds[i], POLLIN);
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
}

static int call_uring(struct ctx *x)
{
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    int ret = io_uring_submit_and_wait(&x->ring, (unsigned)x->active);
    if (ret < 0) {
        errno = -ret;
        return -1;
    }
    io_uring_for_each_cqe(&x->ring, head, cqe)
    {
        seen++;
        arm_uring(x, (int)io_uring_cqe_get_data64(cqe));
    }
    io_uring_cq_advance(&x->ring, seen);
    return (int)seen;
}

static void setup(struct ctx *x)
{
    if (strcmp(x->notifier, "select") == 0) {
        if (x->nfds + 16 > FD_SETSIZE)
            usage("select cannot watch descriptors at or above FD_SETSIZE (1024)");
    } else if (strcmp(x->notifier, "epoll") == 0) {
        x->ep = epoll_create1(EPOLL_CLOEXEC);
        if (x->ep < 0)
            die("epoll_create1");
        for (int i = 0; i < x->nfds; i++) {
            struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
            if (epoll_ctl(x->ep, EPOLL_CTL_ADD, x->fds[i], &ev) < 0)
                die("epoll_ctl");
        }
    } else if (strcmp(x->notifier, "uring") == 0) {
        unsigned entries = 1;
        while (entries < (unsigned)x->nfds && entries < 4096)
            entries <<= 1;
        struct io_uring_params p = {0};
        p.flags = IORING_SETUP_CQSIZE;
        p.cq_entries = (unsigned)x->nfds * 2 + 64;
        int ret = io_uring_queue_init_params(entries, &x->ring, &p);
        if (ret < 0) {
            errno = -ret;
            die("io_uring_queue_init");
        }
        x->ring_ok = 1;
        for (int i = 0; i < x->nfds; i++)
            arm_uring(x, i);
        /* Prime: the ready ones complete at once; leave them in the CQ for the first call. */
        io_uring_submit(&x->ring);
        for (int k = 0; k < x->active; k++) {
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(&x->ring, &cqe) < 0)
                die("io_uring_wait_cqe");
            arm_uring(x, (int)io_uring_cqe_get_data64(cqe));
            io_uring_cqe_seen(&x->ring, cqe);
        }
    } else if (strcmp(x->notifier, "poll") != 0) {
        usage("--notifier must be select, poll, epoll or uring");
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"notifier", required_argument, NULL, 'n'}, {"fds", required_argument, NULL, 'f'},
        {"active", required_argument, NULL, 'a'},   {"iters", required_argument, NULL, 'i'},
        {"cpu", required_argument, NULL, 'c'},      {NULL, 0, NULL, 0},
    };
    struct ctx x = {.notifier = NULL, .iters = 20000, .ep = -1};
    uint64_t v;
    int ch, cpu = -1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'n': x.notifier = optarg; break;
        case 'f':
            if (parse_u64(optarg, 1, 1000000, &v) < 0)
                usage("--fds: expected an integer 1..1000000");
            x.nfds = (int)v;
            break;
        case 'a':
            if (parse_u64(optarg, 1, 1000000, &v) < 0)
                usage("--active: expected an integer >= 1");
            x.active = (int)v;
            break;
        case 'i':
            if (parse_u64(optarg, 1, 100000000, &v) < 0)
                usage("--iters: expected an integer >= 1");
            x.iters = (int)v;
            break;
        case 'c':
            if (parse_u64(optarg, 0, 4095, &v) < 0)
                usage("--cpu: expected a CPU number");
            cpu = (int)v;
            break;
        default: usage("unknown option");
        }
    }
    if (x.notifier == NULL || x.nfds == 0 || x.active == 0)
        usage("--notifier, --fds and --active are required");
    if (x.active > x.nfds)
        usage("--active exceeds --fds");
    if (cpu >= 0 && pin_self_to_cpu(cpu) < 0)
        die("pin");
    open_fds(&x);
    setup(&x);

    int (*call)(struct ctx *) = strcmp(x.notifier, "select") == 0  ? call_select
                                : strcmp(x.notifier, "poll") == 0  ? call_poll
                                : strcmp(x.notifier, "epoll") == 0 ? call_epoll
                                                                   : call_uring;
    int warm = x.iters / 10 + 1;
    long ready = 0;
    for (int i = 0; i < warm; i++)
        if (call(&x) < 0)
            die(x.notifier);
    uint64_t t0 = now_ns();
    for (int i = 0; i < x.iters; i++) {
        int n = call(&x);
        if (n < 0)
            die(x.notifier);
        ready += n;
    }
    uint64_t dt = now_ns() - t0;
    printf("{\"notifier\": \"%s\", \"fds\": %d, \"active\": %d, \"iters\": %d, \"us_per_call\": %.4f, "
           "\"ready_per_call\": %.2f}\n",
           x.notifier, x.nfds, x.active, x.iters, (double)dt / 1e3 / x.iters, (double)ready / x.iters);

    if (x.ring_ok)
        io_uring_queue_exit(&x.ring);
    if (x.ep >= 0)
        close(x.ep);
    for (int i = 0; i < x.nfds; i++)
        close(x.fds[i]);
    free(x.fds);
    free(x.pfds);
    free(x.events);
    return 0;
}
