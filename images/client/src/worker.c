/* worker.c -- one demux-client thread: connects its share of the connections,
 * then drives them from its own epoll instance until the run ends.
 *
 * Every connection has at most one message in flight.  Closed loop: the next
 * message leaves when the echo of the previous one is complete.  Open loop:
 * each connection is a Poisson source of rate R/C (their union is Poisson at
 * R); a request that arrives while the previous one is in flight waits, and its
 * latency counts from the arrival, so a slow server cannot hide its queueing
 * (no coordinated omission).  The waiting requests need no storage: they are
 * the arrivals of the connection's stream between its in-flight request and
 * now, and next_arrival walks that stream in order. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define MAX_EVENTS 256
#define TICK_NS UINT64_C(100000000) /* stall checks and failure polling */
#define NS_PER_S 1e9

void run_fail(struct run *run, const char *fmt, ...)
{
    pthread_mutex_lock(&run->reason_lock);
    if (!atomic_load(&run->failed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(run->reason, sizeof(run->reason), fmt, ap);
        va_end(ap);
        atomic_store(&run->failed, 1);
    }
    pthread_mutex_unlock(&run->reason_lock);
}

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: cheap, and good enough to space arrivals. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* Natural log for x in (0, 1], without libm: x = m * 2^e with m in
 * [sqrt(1/2), sqrt(2)), ln m = 2 atanh((m-1)/(m+1)) as a short odd series. */
static double ln_unit(double x)
{
    union {
        double d;
        uint64_t u;
    } b = {.d = x};
    int e = (int)((b.u >> 52) & 0x7ff) - 1023;
    b.u = (b.u & ~(UINT64_C(0x7ff) << 52)) | (UINT64_C(1023) << 52);
    double m = b.d;
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double z = (m - 1.0) / (m + 1.0), z2 = z * z, term = z, sum = 0.0;
    for (int k = 1; k <= 21; k += 2) {
        sum += term / k;
        term *= z2;
    }
    return 2.0 * sum + e * 0.6931471805599453;
}

/* Exponential inter-arrival gap in ns for a source of the given rate per ns. */
static uint64_t exp_gap_ns(uint64_t *rng, double rate_per_ns)
{
    double u = (double)((rng_next(rng) >> 11) + 1) * 0x1.0p-53; /* (0, 1] */
    return (uint64_t)(-ln_unit(u) / rate_per_ns);
}

/* ---- idle heap (open loop) ---- */

static void heap_swap(struct worker *w, uint32_t a, uint32_t b)
{
    struct conn *t = w->heap[a];
    w->heap[a] = w->heap[b];
    w->heap[b] = t;
    w->heap[a]->heap_pos = a;
    w->heap[b]->heap_pos = b;
}

static void heap_push(struct worker *w, struct conn *c)
{
    uint32_t i = w->heap_len++;
    w->heap[i] = c;
    c->heap_pos = i;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (w->heap[p]->next_arrival <= w->heap[i]->next_arrival)
            break;
        heap_swap(w, i, p);
        i = p;
    }
}

static struct conn *heap_pop(struct worker *w)
{
    struct conn *top = w->heap[0];
    w->heap_len--;
    if (w->heap_len > 0) {
        w->heap[0] = w->heap[w->heap_len];
        w->heap[0]->heap_pos = 0;
        uint32_t i = 0;
        for (;;) {
            uint32_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < w->heap_len && w->heap[l]->next_arrival < w->heap[m]->next_arrival)
                m = l;
            if (r < w->heap_len && w->heap[r]->next_arrival < w->heap[m]->next_arrival)
                m = r;
            if (m == i)
                break;
            heap_swap(w, i, m);
            i = m;
        }
    }
    top->heap_pos = UINT32_MAX;
    return top;
}

/* ---- connection setup ---- */

static int arm(struct worker *w, struct conn *c, int op, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(w->ep, op, c->fd, &ev) < 0) {
        run_fail(w->run, "connection %u: epoll_ctl: %s", c->id, strerror(errno));
        return -1;
    }
    return 0;
}

static int open_conn(struct worker *w, struct conn *c, int *pending)
{
    struct run *run = w->run;
    int one = 1;
    c->fd = socket(run->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        run_fail(run, "connection %u: socket: %s", c->id, strerror(errno));
        return -1;
    }
    /* One small message per round trip: Nagle would hold it back waiting for an ACK. */
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
        run_fail(run, "connection %u: TCP_NODELAY: %s", c->id, strerror(errno));
        return -1;
    }
    if (connect(c->fd, (const struct sockaddr *)&run->addr, run->addrlen) == 0)
        return arm(w, c, EPOLL_CTL_ADD, EPOLLIN);
    if (errno != EINPROGRESS) {
        run_fail(run, "connect to %s:%u failed: %s", run->opt->host, run->opt->port, strerror(errno));
        return -1;
    }
    (*pending)++;
    return arm(w, c, EPOLL_CTL_ADD, EPOLLOUT);
}

static int connect_all(struct worker *w)
{
    struct run *run = w->run;
    struct epoll_event evs[MAX_EVENTS];
    int pending = 0;
    double limit_s = run->opt->stall_timeout_s > 10.0 ? run->opt->stall_timeout_s : 10.0;
    uint64_t deadline = now_ns() + (uint64_t)(limit_s * NS_PER_S);

    for (uint32_t i = 0; i < w->nconns; i++)
        if (open_conn(w, &w->conns[i], &pending) < 0)
            return -1;
    while (pending > 0) {
        uint64_t now = now_ns();
        if (atomic_load(&run->failed))
            return -1;
        if (now >= deadline) {
            run_fail(run, "connect to %s:%u failed: %d connection(s) not established after %.1f s",
                     run->opt->host, run->opt->port, pending, limit_s);
            return -1;
        }
        int n = epoll_wait(w->ep, evs, MAX_EVENTS, 100);
        if (n < 0 && errno != EINTR) {
            run_fail(run, "epoll_wait: %s", strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            int err = 0;
            socklen_t len = sizeof(err);
            if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
            if (err != 0) {
                run_fail(run, "connect to %s:%u failed: %s", run->opt->host, run->opt->port,
                         strerror(err));
                return -1;
            }
            if (arm(w, c, EPOLL_CTL_MOD, EPOLLIN) < 0)
                return -1;
            pending--;
        }
    }
    return 0;
}

/* ---- the message cycle ---- */

static int send_more(struct worker *w, struct conn *c)
{
    const struct options *opt = w->run->opt;
    const uint8_t *msg = w->run->pattern + c->off;
    while (c->sent < opt->msg_size) {
        ssize_t n = send(c->fd, msg + c->sent, opt->msg_size - c->sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->sent += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->want_out) {
                c->want_out = 1;
                return arm(w, c, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT);
            }
            return 0;
        }
        run_fail(w->run, "connection %u: send: %s", c->id, n < 0 ? strerror(errno) : "sent nothing");
        return -1;
    }
    if (c->want_out) {
        c->want_out = 0;
        return arm(w, c, EPOLL_CTL_MOD, EPOLLIN);
    }
    return 0;
}

static bool in_measure(const struct run *run, uint64_t t)
{
    return t >= run->warm_end && t < run->meas_end;
}

static int start_message(struct worker *w, struct conn *c, uint64_t start, uint64_t now, double rate_per_ns)
{
    if (rate_per_ns > 0.0 && in_measure(w->run, start))
        w->offered++;
    c->busy = 1;
    c->start_ns = start;
    c->progress_ns = now;
    c->sent = 0;
    c->recvd = 0;
    c->off = (uint32_t)((c->id * UINT64_C(37) + c->seq) % PATTERN_PERIOD);
    if (rate_per_ns > 0.0)
        c->next_arrival += exp_gap_ns(&c->rng, rate_per_ns);
    return send_more(w, c);
}

static void record(struct worker *w, const struct conn *c, uint64_t t)
{
    struct run *run = w->run;
    if (t < run->warm_end || t >= run->meas_end)
        return;
    uint64_t sec = (t - run->warm_end) / UINT64_C(1000000000);
    if (sec < run->nseconds) /* relaxed: --progress reads the counters while this thread counts */
        __atomic_store_n(&w->per_sec[sec], __atomic_load_n(&w->per_sec[sec], __ATOMIC_RELAXED) + 1,
                         __ATOMIC_RELAXED);
    w->messages++;
    hist_add(&w->lat, t - c->start_ns);
}

static int report_mismatch(struct worker *w, const struct conn *c, const uint8_t *got, const uint8_t *want,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            run_fail(w->run,
                     "wrong bytes: connection %u, message %llu, offset %llu: got 0x%02x, expected 0x%02x",
                     c->id, (unsigned long long)c->seq, (unsigned long long)(c->recvd + i), got[i],
                     want[i]);
            return -1;
        }
    }
    return 0;
}

static int on_readable(struct worker *w, struct conn *c, uint64_t now, double rate_per_ns)
{
    const struct options *opt = w->run->opt;
    uint64_t expect = c->busy ? opt->msg_size - c->recvd : 0;
    ssize_t n = recv(c->fd, w->rbuf, w->rbuf_size, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return 0;
        run_fail(w->run, "connection %u: recv: %s", c->id, strerror(errno));
        return -1;
    }
    if (n == 0) {
        run_fail(w->run, "connection %u: server closed the connection", c->id);
        return -1;
    }
    if ((uint64_t)n > expect) {
        run_fail(w->run, "wrong bytes: connection %u: %zd byte(s) received where %llu were due", c->id, n,
                 (unsigned long long)expect);
        return -1;
    }
    const uint8_t *want = w->run->pattern + c->off + c->recvd;
    if (memcmp(w->rbuf, want, (size_t)n) != 0)
        return report_mismatch(w, c, w->rbuf, want, (size_t)n);
    c->recvd += (uint64_t)n;
    c->progress_ns = now;
    if (c->recvd < opt->msg_size)
        return 0;

    uint64_t t = now_ns();
    record(w, c, t);
    /* Served: an arrival of the measure phase echoed before the run ended (the last loop turn can
     * finish one just after the end; with no cool-down that one is outside the window, not served). */
    if (rate_per_ns > 0.0 && in_measure(w->run, c->start_ns) && t < w->run->end)
        w->served++;
    c->busy = 0;
    c->seq++;
    if (rate_per_ns <= 0.0)
        return start_message(w, c, t, t, 0.0);
    if (c->next_arrival <= t)
        return start_message(w, c, c->next_arrival, t, rate_per_ns);
    heap_push(w, c);
    return 0;
}

static int check_stalls(struct worker *w, uint64_t now)
{
    uint64_t limit = (uint64_t)(w->run->opt->stall_timeout_s * NS_PER_S);
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->busy && now - c->progress_ns > limit) {
            run_fail(w->run,
                     "stall: connection %u made no progress for %.1f s (message %llu, %llu of %u bytes "
                     "sent, %llu echoed)",
                     c->id, (double)(now - c->progress_ns) / NS_PER_S, (unsigned long long)c->seq,
                     (unsigned long long)c->sent, w->run->opt->msg_size, (unsigned long long)c->recvd);
            return -1;
        }
    }
    return 0;
}

/* The thread's books at the start and at the end of the measure phase. */
static void books_start(struct worker *w)
{
    thread_cpu_times(&w->cpu_start_user, &w->cpu_start_sys);
    w->wait_start = thread_wait_s();
    w->sleeps_start = thread_sleeps();
    w->cpu_started = 1;
}

static void books_end(struct worker *w)
{
    thread_cpu_times(&w->cpu_end_user, &w->cpu_end_sys);
    w->wait_end = thread_wait_s();
    w->sleeps_end = thread_sleeps();
    w->cpu_ended = 1;
}

static void note_phase(struct worker *w, uint64_t now)
{
    if (!w->cpu_started && now >= w->run->warm_end)
        books_start(w);
    if (!w->cpu_ended && now >= w->run->meas_end)
        books_end(w);
}

/* Sleeps in epoll until the deadline with ns resolution where the kernel has
 * epoll_pwait2 (5.11+); elsewhere rounds up to whole milliseconds. */
static int wait_events(struct worker *w, struct epoll_event *evs, uint64_t timeout_ns)
{
    static atomic_int no_pwait2;
    if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000u),
                              .tv_nsec = (long)(timeout_ns % 1000000000u)};
        int n = epoll_pwait2(w->ep, evs, MAX_EVENTS, &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        atomic_store_explicit(&no_pwait2, 1, memory_order_relaxed);
    }
    return epoll_wait(w->ep, evs, MAX_EVENTS, (int)((timeout_ns + 999999u) / 1000000u));
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static void drive(struct worker *w)
{
    struct run *run = w->run;
    const struct options *opt = run->opt;
    struct epoll_event evs[MAX_EVENTS];
    double rate_per_ns = opt->rate > 0.0 ? opt->rate / opt->connections / NS_PER_S : 0.0;
    uint64_t now = now_ns(), next_check = now + TICK_NS;

    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (rate_per_ns > 0.0) {
            c->next_arrival = run->t0 + exp_gap_ns(&c->rng, rate_per_ns);
            heap_push(w, c);
        } else if (start_message(w, c, now, now, 0.0) < 0) {
            return;
        }
    }
    for (;;) {
        now = now_ns();
        note_phase(w, now);
        if (now >= run->end || atomic_load_explicit(&run->failed, memory_order_relaxed))
            return;
        while (w->heap_len > 0 && w->heap[0]->next_arrival <= now) {
            struct conn *c = heap_pop(w);
            if (start_message(w, c, c->next_arrival, now, rate_per_ns) < 0)
                return;
        }
        if (now >= next_check) {
            if (check_stalls(w, now) < 0)
                return;
            next_check = now + TICK_NS;
        }
        uint64_t wake = min_u64(run->end, next_check);
        if (now < run->warm_end)
            wake = min_u64(wake, run->warm_end);
        else if (now < run->meas_end)
            wake = min_u64(wake, run->meas_end);
        if (w->heap_len > 0)
            wake = min_u64(wake, w->heap[0]->next_arrival);
        if (in_measure(run, now))
            w->calls++;
        int n = wait_events(w, evs, wake > now ? wake - now : 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            run_fail(run, "epoll_wait: %s", strerror(errno));
            return;
        }
        if (n > 0)
            now = now_ns();
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if ((evs[i].events & EPOLLOUT) && c->busy && c->sent < opt->msg_size) {
                if (send_more(w, c) < 0)
                    return;
                c->progress_ns = now;
            }
            if ((evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && on_readable(w, c, now, rate_per_ns) < 0)
                return;
        }
    }
}

/* Open loop, after the run: the arrivals of the measure phase that never got
 * to start (the client or the server had fallen behind) are offered too.
 * next_arrival is each connection's first unstarted arrival; walk on. */
static void count_unstarted(struct worker *w)
{
    const struct run *run = w->run;
    double rate_per_ns = run->opt->rate / run->opt->connections / NS_PER_S;
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        for (uint64_t a = c->next_arrival; a < run->meas_end; a += exp_gap_ns(&c->rng, rate_per_ns))
            if (a >= run->warm_end)
                w->offered++;
    }
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *run = w->run;
    const struct options *opt = run->opt;

    if (opt->ncpus > 0) {
        int cpu = opt->cpus[w->index % opt->ncpus];
        if (pin_self_to_cpu(cpu) < 0)
            run_fail(run, "cannot pin client thread %d to CPU %d: %s", w->index, cpu, strerror(errno));
    }
    if (!atomic_load(&run->failed))
        connect_all(w);
    /* Every worker reaches both barriers, even after a failure, so none is left waiting. */
    pthread_barrier_wait(&run->connected);
    pthread_barrier_wait(&run->started);
    if (!atomic_load(&run->failed)) {
        drive(w);
        if (opt->rate > 0.0)
            count_unstarted(w);
    }
    /* A run cut short still closes its books: the report is not written on failure anyway. */
    if (!w->cpu_started)
        books_start(w);
    if (!w->cpu_ended)
        books_end(w);
    return NULL;
}
