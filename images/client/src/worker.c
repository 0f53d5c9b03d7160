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
 * now, and arr walks that stream in order.
 *
 * Open-loop arrivals leave on time: the thread asks for 1 ns of timer slack,
 * sleeps until shortly before a due arrival (margin_ns, which follows the 90th
 * percentile of how late its sleeps wake) and polls its epoll without blocking
 * for the rest, so echoes are still read meanwhile.
 *
 * One population per run: everything reported counts the requests whose
 * intended start falls in the measure phase (closed loop: the send time) and
 * whose echo completed before the run's end; the books (CPU, waits) cover the
 * measure phase.  An early stop (--progress) cuts all of it at one whole second:
 * the counters are kept per second of intended start, the histograms per second
 * until that second is sealed, and the books are sampled at every second. */
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
#include <sys/prctl.h>
#include <sys/resource.h>
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
        if (w->heap[p]->arr.at <= w->heap[i]->arr.at)
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
            if (l < w->heap_len && w->heap[l]->arr.at < w->heap[m]->arr.at)
                m = l;
            if (r < w->heap_len && w->heap[r]->arr.at < w->heap[m]->arr.at)
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
    if (SYSC(epoll_ctl(w->ep, op, c->fd, &ev)) < 0) {
        run_fail(w->run, "connection %u: epoll_ctl: %s", c->id, strerror(errno));
        return -1;
    }
    return 0;
}

static int open_conn(struct worker *w, struct conn *c, int *pending)
{
    struct run *run = w->run;
    int one = 1;
    c->fd = SYSC(socket(run->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (c->fd < 0) {
        run_fail(run, "connection %u: socket: %s", c->id, strerror(errno));
        return -1;
    }
    /* One small message per round trip: Nagle would hold it back waiting for an ACK. */
    if (SYSC(setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))) < 0) {
        run_fail(run, "connection %u: TCP_NODELAY: %s", c->id, strerror(errno));
        return -1;
    }
    if (SYSC(connect(c->fd, (const struct sockaddr *)&run->addr, run->addrlen)) == 0)
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
        int n = SYSC(epoll_wait(w->ep, evs, MAX_EVENTS, 100));
        if (n < 0 && errno != EINTR) {
            run_fail(run, "epoll_wait: %s", strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            int err = 0;
            socklen_t len = sizeof(err);
            if (SYSC(getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len)) < 0)
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
        ssize_t n = SYSC(send(c->fd, msg + c->sent, opt->msg_size - c->sent, MSG_NOSIGNAL));
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

/* ---- the population and its books ---- */

static bool in_measure(const struct run *run, uint64_t t)
{
    return t >= run->warm_end && t < atomic_load(&run->meas_end);
}

/* The second of the measure phase an intended start t (in_measure) falls in; nseconds for the part of
 * a second after the last whole one. */
static uint32_t second_of(const struct run *run, uint64_t t)
{
    uint64_t s = (t - run->warm_end) / UINT64_C(1000000000);
    return s < run->nseconds ? (uint32_t)s : run->nseconds;
}

/* Where the histograms of a request that starts in second s go: the totals once s is sealed, else that
 * second's own, so that an early stop can leave it out whole.  NULL when memory ran out (the run fails). */
static struct hists *hists_of(struct worker *w, uint32_t s)
{
    if (s < atomic_load_explicit(&w->run->sealed, memory_order_relaxed))
        return &w->tot;
    if (w->pend[s] == NULL) {
        w->pend[s] = malloc(sizeof(*w->pend[s]));
        if (w->pend[s] == NULL) {
            run_fail(w->run, "out of memory for the histograms of second %u", s + 1);
            return NULL;
        }
        hist_init(&w->pend[s]->lat);
        hist_init(&w->pend[s]->late);
    }
    return w->pend[s];
}

/* Folds the seconds sealed since the last turn into the totals (which keeps memory to the few seconds an
 * early stop could still cut). */
static void fold_sealed(struct worker *w)
{
    uint32_t sealed = atomic_load_explicit(&w->run->sealed, memory_order_relaxed);
    for (; w->folded < sealed && w->folded <= w->run->nseconds; w->folded++) {
        struct hists *h = w->pend[w->folded];
        if (h != NULL) {
            hist_merge(&w->tot.lat, &h->lat);
            hist_merge(&w->tot.late, &h->late);
            free(h);
            w->pend[w->folded] = NULL;
        }
    }
}

/* When books[k] is due: each whole second of the measure phase, the last at its planned end. */
static uint64_t book_time(const struct run *run, uint32_t k)
{
    return k < run->nseconds ? run->warm_end + k * UINT64_C(1000000000) : run->meas_end0;
}

static void sample_books(struct worker *w, struct books *b)
{
    b->syscalls = sysc_mine(); /* first: the sample's own calls are the next interval's */
    thread_cpu_times(&b->user, &b->sys);
    b->wait = thread_wait_s();
    b->sleeps = thread_sleeps();
    b->calls = w->calls;
    b->spin_ns = w->spin_ns;
}

static void take_books(struct worker *w, uint64_t now)
{
    const struct run *run = w->run;
    if (w->nbooks > run->nseconds || now < book_time(run, w->nbooks))
        return;
    sample_books(w, &w->books[w->nbooks]);
    /* A thread that slept through several boundaries (a stalled machine) books them alike. */
    for (w->nbooks++; w->nbooks <= run->nseconds && now >= book_time(run, w->nbooks); w->nbooks++)
        w->books[w->nbooks] = w->books[w->nbooks - 1];
}

/* ---- the message cycle ---- */

static int start_message(struct worker *w, struct conn *c, uint64_t start, uint64_t now, bool open)
{
    if (open && in_measure(w->run, start)) {
        uint32_t s = second_of(w->run, start);
        struct hists *h = hists_of(w, s);
        if (h == NULL)
            return -1;
        /* Late by what the client added: from the intended time, or from the echo that freed the
         * connection where the request waited behind its predecessor (that wait is the server's). */
        uint64_t ref = start > c->free_ns ? start : c->free_ns, sent = now_ns();
        hist_add(&h->late, sent > ref ? sent - ref : 0);
        w->offered_sec[s]++;
    }
    c->busy = 1;
    c->start_ns = start;
    c->progress_ns = now;
    c->sent = 0;
    c->recvd = 0;
    c->off = (uint32_t)((c->id * UINT64_C(37) + c->seq) % PATTERN_PERIOD);
    if (open) {
        arrival_advance(&c->arr, w->run->mean_gap_ns);
        /* The schedule's gap after an arrival of the measure phase, for the report's goodness of fit. */
        if (in_measure(w->run, start) && c->arr.at != ARRIVAL_NEVER)
            w->gap_bins[arrival_gap_bin((double)(c->arr.at - start) / w->run->mean_gap_ns)]++;
    }
    return send_more(w, c);
}

/* An echo completed at t: counted if its request is of the population (intended start in the measure
 * phase, completed before the run's end). */
static int record(struct worker *w, const struct conn *c, uint64_t t)
{
    struct run *run = w->run;
    if (!in_measure(run, c->start_ns) || t >= atomic_load(&run->end))
        return 0;
    uint32_t s = second_of(run, c->start_ns);
    struct hists *h = hists_of(w, s);
    if (h == NULL)
        return -1;
    /* relaxed: --progress reads the counters while this thread counts */
    __atomic_store_n(&w->per_sec[s], __atomic_load_n(&w->per_sec[s], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    hist_add(&h->lat, t - c->start_ns);
    return 0;
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

static int on_readable(struct worker *w, struct conn *c, uint64_t now, bool open)
{
    const struct options *opt = w->run->opt;
    uint64_t expect = c->busy ? opt->msg_size - c->recvd : 0;
    ssize_t n = SYSC(recv(c->fd, w->rbuf, w->rbuf_size, 0));
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
    if (record(w, c, t) < 0)
        return -1;
    c->busy = 0;
    c->seq++;
    c->free_ns = t;
    if (!open)
        return start_message(w, c, t, t, false);
    if (c->arr.at <= t)
        return start_message(w, c, c->arr.at, t, true);
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

/* Sleeps in epoll until the deadline with ns resolution where the kernel has
 * epoll_pwait2 (5.11+); elsewhere rounds up to whole milliseconds. */
static int wait_events(struct worker *w, struct epoll_event *evs, uint64_t timeout_ns)
{
    static atomic_int no_pwait2;
    if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
        struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000u),
                              .tv_nsec = (long)(timeout_ns % 1000000000u)};
        int n = SYSC(epoll_pwait2(w->ep, evs, MAX_EVENTS, &ts, NULL));
        if (n >= 0 || errno != ENOSYS)
            return n;
        atomic_store_explicit(&no_pwait2, 1, memory_order_relaxed);
    }
    return SYSC(epoll_wait(w->ep, evs, MAX_EVENTS, (int)((timeout_ns + 999999u) / 1000000u)));
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The spin's margin follows the 90th percentile of how late the thread's sleeps wake: up 9 steps when a
 * wake-up was later than the margin, down 1 when not (it settles where 1 in 10 is later).  Bounded, so
 * that a stalled machine cannot make a worker spin most of its time: the spin costs at most MARGIN_MAX_NS
 * of CPU per arrival the thread sleeps for. */
#define MARGIN_INIT_NS 50000
#define MARGIN_MIN_NS 1000
#define MARGIN_MAX_NS 200000
#define MARGIN_STEP_NS 100

static void learn_margin(struct worker *w, uint64_t planned, uint64_t woke)
{
    int64_t late = (int64_t)(woke - planned);
    w->margin_ns += late > w->margin_ns ? 9 * MARGIN_STEP_NS : -MARGIN_STEP_NS;
    if (w->margin_ns < MARGIN_MIN_NS)
        w->margin_ns = MARGIN_MIN_NS;
    if (w->margin_ns > MARGIN_MAX_NS)
        w->margin_ns = MARGIN_MAX_NS;
}

static void drive(struct worker *w)
{
    struct run *run = w->run;
    const struct options *opt = run->opt;
    struct epoll_event evs[MAX_EVENTS];
    bool open = opt->rate > 0.0;
    uint64_t now = now_ns(), next_check = now + TICK_NS, spin_since = 0;

    for (uint32_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (open) {
            c->arr.at = run->t0;
            c->arr.frac = 0.0;
            arrival_advance(&c->arr, run->mean_gap_ns);
            heap_push(w, c);
        } else if (start_message(w, c, now, now, false) < 0) {
            return;
        }
    }
    for (;;) {
        now = now_ns();
        if (spin_since != 0) {
            w->spin_ns += now - spin_since;
            spin_since = 0;
        }
        take_books(w, now);
        fold_sealed(w);
        if (now >= atomic_load(&run->end) || atomic_load_explicit(&run->failed, memory_order_relaxed))
            return;
        while (w->heap_len > 0 && w->heap[0]->arr.at <= now) {
            struct conn *c = heap_pop(w);
            if (start_message(w, c, c->arr.at, now, true) < 0)
                return;
        }
        if (now >= next_check) {
            if (check_stalls(w, now) < 0)
                return;
            next_check = now + TICK_NS;
        }
        uint64_t wake = min_u64(atomic_load(&run->end), next_check);
        if (w->nbooks <= run->nseconds)
            wake = min_u64(wake, book_time(run, w->nbooks));
        bool arrival = w->heap_len > 0 && w->heap[0]->arr.at <= wake;
        if (arrival)
            wake = w->heap[0]->arr.at;
        uint64_t timeout = wake > now ? wake - now : 0, planned = 0;
        if (arrival && timeout > 0) {
            if (timeout <= (uint64_t)w->margin_ns) {
                timeout = 0; /* spin: poll for echoes until the arrival is due */
                spin_since = now;
            } else {
                /* Wake margin_ns early, less the slack the kernel adds to a sleep this long. */
                uint64_t lead = timeout - (uint64_t)w->margin_ns;
                planned = now + lead;
                timeout = lead - lead / (w->slack_div + 1);
            }
        }
        if (spin_since == 0)
            w->calls++;
        int n = wait_events(w, evs, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            run_fail(run, "epoll_wait: %s", strerror(errno));
            return;
        }
        if (n > 0 || planned != 0)
            now = now_ns();
        if (n == 0 && planned != 0)
            learn_margin(w, planned, now);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if ((evs[i].events & EPOLLOUT) && c->busy && c->sent < opt->msg_size) {
                if (send_more(w, c) < 0)
                    return;
                c->progress_ns = now;
            }
            if ((evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && on_readable(w, c, now, open) < 0)
                return;
        }
    }
}

/* Open loop, after the run: the arrivals of the measure phase that never got
 * to start (the client or the server had fallen behind) are offered too, and
 * their gaps are the schedule's as well.
 * arr is each connection's first unstarted arrival; walk on. */
static void count_unstarted(struct worker *w)
{
    const struct run *run = w->run;
    uint64_t meas_end = atomic_load(&run->meas_end);
    for (uint32_t i = 0; i < w->nconns; i++) {
        struct arrival a = w->conns[i].arr;
        while (a.at < meas_end) {
            uint64_t at = a.at;
            arrival_advance(&a, run->mean_gap_ns);
            if (at < run->warm_end)
                continue;
            w->offered_sec[second_of(run, at)]++;
            if (a.at != ARRIVAL_NEVER) /* its gap, as start_message books a started one's */
                w->gap_bins[arrival_gap_bin((double)(a.at - at) / run->mean_gap_ns)]++;
        }
    }
}

void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *run = w->run;
    const struct options *opt = run->opt;
    sysc_register();

    if (opt->ncpus > 0) {
        int cpu = opt->cpus[w->index % opt->ncpus];
        if (pin_self_to_cpu(cpu) < 0)
            run_fail(run, "cannot pin client thread %d to CPU %d: %s", w->index, cpu, strerror(errno));
    }
    /* Arrivals on time: the default 50 us of slack would let every sleep end up to 50 us late. */
    if (SYSC(prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL)) != 0)
        run_fail(run, "cannot set client thread %d's timer slack to 1 ns: %s", w->index, strerror(errno));
    /* select_estimate_accuracy(): a sleep of t gets at least t/1000 of slack, t/200 when niced. */
    errno = 0;
    int nice = SYSC(getpriority(PRIO_PROCESS, 0));
    w->slack_div = errno == 0 && nice > 0 ? 200 : 1000;
    w->margin_ns = MARGIN_INIT_NS;
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
    if (w->nbooks <= run->nseconds) {
        sample_books(w, &w->books[w->nbooks]);
        for (w->nbooks++; w->nbooks <= run->nseconds; w->nbooks++)
            w->books[w->nbooks] = w->books[w->nbooks - 1];
    }
    sysc_end();
    return NULL;
}
