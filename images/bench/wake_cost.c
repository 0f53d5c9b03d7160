/* wake_cost.c -- what a loopback send costs its sender when it wakes the
 * receiving thread, asleep in epoll_wait on another CPU, against a send that
 * finds the receiver awake (docs/ctmc-reference.md, "What the client's CPU per message
 * follows": the echo client's CPU per message grows by ~10 us for every time a
 * server thread went to sleep).
 *
 *   wake-cost --cpus A,B [--sends N]
 *
 * One TCP connection over 127.0.0.1. The sender, pinned to CPU A, sends one
 * byte N times per mode and times the send call in its own CPU time
 * (CLOCK_THREAD_CPUTIME_ID); the receiver, pinned to CPU B, takes each byte:
 *   asleep: it blocks in epoll_wait, and the sender waits 50 us after each
 *           byte was taken, so that the receiver is asleep again;
 *   awake:  it polls epoll_wait with a zero timeout, so no send wakes it;
 *   asleep on a busy CPU: as asleep, with a third thread spinning on CPU B
 *           (the server's case: one thread asleep while another runs).
 * The loopback runs the receive path in the sender's softirq, inside its send
 * call, so the difference is the wake-up.
 *
 * Then the hand-off of a lock to a sleeper (uring-shared's submission lock,
 * docs/ctmc-reference.md): a thread on CPU B blocks on a pthread mutex that a thread on
 * CPU A holds (B's CPU idle meanwhile), A releases it, N times; the latency
 * from the release (just before pthread_mutex_unlock) to B holding the lock is
 * how long the released lock stays idle until its woken waiter runs.
 * Prints one JSON line:
 *   {"cpus": [A, B], "sends": N, "asleep_ns": median, "awake_ns": median,
 *    "busy_ns": median (asleep on a busy CPU), "wake_ns": asleep_ns - awake_ns,
 *    "busy_wake_ns": busy_ns - awake_ns, "handoff_ns": median hand-off}
 * Exit 2 for bad options, 1 when it cannot pin or set up the connection. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "helper_args.h"
#include "util.h"

#define SETTLE_US 50.0 /* the receiver's time to fall asleep again after a byte */

struct receiver {
    int cpu;
    int fd;
    _Atomic int polling; /* 1: awake mode (epoll_wait with a zero timeout) */
    _Atomic int stop;
    _Atomic int failed;      /* errno of a failed pin or call */
    _Atomic uint64_t taken;  /* bytes received */
};

/* Pins the calling helper thread to `cpu`; where it cannot, records why in
 * *failed (the main thread reports it) and returns -1. */
static int pin_or_record(int cpu, _Atomic int *failed)
{
    if (pin_self_to_cpu(cpu) == 0)
        return 0;
    atomic_store(failed, errno ? errno : EINVAL);
    return -1;
}

static void *receive(void *arg)
{
    struct receiver *r = arg;
    if (pin_or_record(r->cpu, &r->failed) < 0)
        return NULL;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = r->fd};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, r->fd, &ev) < 0) {
        atomic_store(&r->failed, errno);
        return NULL;
    }
    char buf[256];
    while (!atomic_load(&r->stop)) {
        /* asleep mode wakes at least every 10 ms to see the stop flag */
        int n = epoll_wait(ep, &ev, 1, atomic_load(&r->polling) ? 0 : 10);
        if (n < 0 && errno != EINTR) {
            atomic_store(&r->failed, errno);
            break;
        }
        if (n <= 0)
            continue;
        ssize_t got = recv(r->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (got > 0)
            atomic_fetch_add(&r->taken, (uint64_t)got);
    }
    close(ep);
    return NULL;
}

struct spinner {
    int cpu;
    _Atomic int stop;
    _Atomic int failed;
};

/* Keeps CPU B busy while the receiver sleeps on it (asleep on a busy CPU). */
static void *spin(void *arg)
{
    struct spinner *sp = arg;
    if (pin_or_record(sp->cpu, &sp->failed) < 0)
        return NULL;
    while (!atomic_load_explicit(&sp->stop, memory_order_relaxed))
        ;
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The lock's hand-off: the waiter's side, on CPU B. */
struct handoff {
    int cpu;
    uint64_t rounds;
    uint64_t *latency;      /* per round: from the release to the waiter holding the lock, ns */
    pthread_mutex_t mu;     /* held by the releaser whenever a round starts */
    _Atomic uint64_t start; /* the rounds the waiter may start (block on the lock) */
    _Atomic uint64_t done;  /* the rounds it finished */
    _Atomic uint64_t released_at;
    _Atomic int failed;
};

static void *take_handed_lock(void *arg)
{
    struct handoff *h = arg;
    if (pin_or_record(h->cpu, &h->failed) < 0) {
        atomic_store(&h->done, h->rounds); /* the releaser stops waiting for rounds */
        return NULL;
    }
    for (uint64_t i = 0; i < h->rounds; i++) {
        while (atomic_load(&h->start) <= i)
            ;
        pthread_mutex_lock(&h->mu); /* held: sleeps in the futex until the release */
        h->latency[i] = now_ns() - atomic_load(&h->released_at);
        pthread_mutex_unlock(&h->mu);
        atomic_store(&h->done, i + 1);
    }
    return NULL;
}

/* The median hand-off of a released lock to its waiter asleep on CPU `cpu`, in ns; 0 on failure. */
static uint64_t measure_handoff(int cpu, uint64_t rounds, uint64_t *latency)
{
    struct handoff h = {.cpu = cpu, .rounds = rounds, .latency = latency};
    if (pthread_mutex_init(&h.mu, NULL) != 0)
        return 0;
    pthread_mutex_lock(&h.mu);
    pthread_t t;
    int rc = pthread_create(&t, NULL, take_handed_lock, &h);
    if (rc != 0) {
        pthread_mutex_unlock(&h.mu);
        pthread_mutex_destroy(&h.mu);
        errno = rc;
        return 0;
    }
    for (uint64_t i = 0; i < rounds && !atomic_load(&h.failed); i++) {
        atomic_store(&h.start, i + 1);
        spin_us(SETTLE_US); /* the waiter blocks on the lock and its CPU goes idle */
        atomic_store(&h.released_at, now_ns());
        pthread_mutex_unlock(&h.mu);
        while (atomic_load(&h.done) <= i)
            ;
        pthread_mutex_lock(&h.mu);
    }
    pthread_mutex_unlock(&h.mu);
    pthread_join(t, NULL);
    pthread_mutex_destroy(&h.mu);
    if (atomic_load(&h.failed)) {
        errno = atomic_load(&h.failed);
        return 0;
    }
    qsort(latency, rounds, sizeof(latency[0]), cmp_u64);
    return latency[rounds / 2];
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The median CPU time of `sends` one-byte sends in the receiver's current mode; 0 on failure. */
static uint64_t measure(int fd, struct receiver *r, uint64_t sends, uint64_t *times)
{
    const char byte = 'w';
    for (uint64_t i = 0; i < sends; i++) {
        uint64_t want = atomic_load(&r->taken) + 1;
        uint64_t t0 = thread_cpu_ns();
        if (send(fd, &byte, 1, 0) != 1)
            return 0;
        times[i] = thread_cpu_ns() - t0;
        while (atomic_load(&r->taken) < want)
            if (atomic_load(&r->failed))
                return 0;
        spin_us(SETTLE_US);
    }
    qsort(times, sends, sizeof(times[0]), cmp_u64);
    return times[sends / 2];
}

static int fail(const char *what)
{
    fprintf(stderr, "wake-cost: %s: %s\n", what, strerror(errno));
    return 1;
}

/* A connected pair over 127.0.0.1: out[0] the sender's end, out[1] the receiver's. */
static int connect_pair(int out[2])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int one = 1;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &len) < 0)
        return -1;
    out[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (out[0] < 0 || connect(out[0], (struct sockaddr *)&a, sizeof(a)) < 0)
        return -1;
    out[1] = accept(ls, NULL, NULL);
    close(ls);
    if (out[1] < 0 || setsockopt(out[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct helper_args args = {"wake-cost", "sends", 1, 1000000, "1 to 1000000"};
    int cpus[2];
    uint64_t sends = 2000;
    int bad = parse_helper_args(&args, argc, argv, cpus, &sends);
    if (bad)
        return bad;
    if (pin_self_to_cpu(cpus[0]) < 0)
        return fail("cannot pin to the first CPU");
    int fds[2];
    if (connect_pair(fds) < 0)
        return fail("cannot connect over 127.0.0.1");
    uint64_t *times = calloc(sends, sizeof(*times));
    if (times == NULL)
        return fail("out of memory");
    struct receiver r = {.cpu = cpus[1], .fd = fds[1]};
    pthread_t t;
    int rc = pthread_create(&t, NULL, receive, &r);
    if (rc != 0) {
        errno = rc;
        return fail("cannot start a thread");
    }
    uint64_t asleep = measure(fds[0], &r, sends, times), busy = 0, awake = 0;
    struct spinner sp = {.cpu = cpus[1]};
    pthread_t st;
    if (asleep && (rc = pthread_create(&st, NULL, spin, &sp)) == 0) {
        busy = measure(fds[0], &r, sends, times);
        atomic_store(&sp.stop, 1);
        pthread_join(st, NULL);
    }
    atomic_store(&r.polling, 1);
    if (busy)
        awake = measure(fds[0], &r, sends, times);
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    uint64_t handoff = awake ? measure_handoff(cpus[1], sends, times) : 0;
    free(times);
    if (atomic_load(&r.failed) || atomic_load(&sp.failed)) {
        errno = atomic_load(&r.failed) ? atomic_load(&r.failed) : atomic_load(&sp.failed);
        return fail("cannot pin to the second CPU, or epoll failed there");
    }
    if (rc != 0) {
        errno = rc;
        return fail("cannot start a thread");
    }
    if (asleep == 0 || busy == 0 || awake == 0)
        return fail("send failed");
    if (handoff == 0)
        return fail("the lock's hand-off failed (pin to the second CPU, or a thread)");
    printf("{\"cpus\": [%d, %d], \"sends\": %llu, \"asleep_ns\": %llu, \"awake_ns\": %llu, \"busy_ns\": %llu, "
           "\"wake_ns\": %lld, \"busy_wake_ns\": %lld, \"handoff_ns\": %llu}\n",
           cpus[0], cpus[1], (unsigned long long)sends, (unsigned long long)asleep, (unsigned long long)awake,
           (unsigned long long)busy, (long long)asleep - (long long)awake, (long long)busy - (long long)awake,
           (unsigned long long)handoff);
    return 0;
}
