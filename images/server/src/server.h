/* server.h -- shared state of demux-server: configuration, connection table,
 * per-thread statistics, and the two small contracts every pattern and every
 * notifier is written against. */
#ifndef DEMUX_SERVER_H
#define DEMUX_SERVER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <unistd.h>

#include "hist.h"
#include "demux_limits.h"
#include "util.h"

#define MAX_THREADS DEMUX_MAX_THREADS
#define MAX_EVENTS 64 /* descriptors taken from one notifier call */
#define MAX_MSG_SIZE ((unsigned)DEMUX_MAX_MSG_SIZE)
#define MAX_CPUS DEMUX_MAX_CPUS

/* ---- instrumentation ------------------------------------------------- */

enum op {
    OP_NOTIFY,
    OP_LOCK,
    OP_QUEUE_PUT,
    OP_QUEUE_GET,
    OP_PROMOTE,
    OP_RECV,
    OP_REARM,
    OP_WORK,
    OP_SEND,
    OP_ACCEPT,
    OP_IDLE,
    OP_COUNT
};

extern const char *const op_names[OP_COUNT];

/* Allocated only with --instrument: the histograms are ~20 KiB each. */
struct tinstr {
    struct hist ops[OP_COUNT];
    uint64_t calls;                     /* notifier calls */
    uint64_t events;                    /* descriptors they returned */
    uint64_t events_max;
    uint64_t by_events_n[MAX_EVENTS + 1]; /* index = events returned (exact: a call returns at most MAX_EVENTS) */
    uint64_t by_events_ns[MAX_EVENTS + 1];
};

/* Everything a thread counts lives here, written only by its own thread and
 * read by main after the join, so no atomics are needed. */
struct tstat {
    uint64_t messages;
    uint64_t accepted;
    uint64_t closed;
    double user_s, sys_s;
    struct tinstr *in; /* NULL without --instrument */
};

extern _Thread_local struct tstat *cur_ts;

static inline uint64_t instr_start(void)
{
    return cur_ts->in ? now_ns() : 0;
}

static inline void instr_end(enum op op, uint64_t t0)
{
    if (cur_ts->in)
        hist_add(&cur_ts->in->ops[op], now_ns() - t0);
}

void instr_notify(uint64_t t0, int nevents);
void instr_wait_events(int nevents);

/* pthread_mutex_lock, with the wait counted as the `lock` operation. */
static inline void lock_timed(pthread_mutex_t *m)
{
    uint64_t t0 = instr_start();
    pthread_mutex_lock(m);
    instr_end(OP_LOCK, t0);
}

/* ---- notifiers ------------------------------------------------------- */

/* Contract: the caller registers descriptors armed; a descriptor reported by
 * wait() is deactivated until rearm() (select, poll, epoll-lt, uring), except
 * for edge-triggered notifiers (edge = true), which report again on new data
 * and need no rearm.  Only one thread waits on a notifier at a time; add, del
 * and rearm may be called from any thread.  wake() makes a blocked wait()
 * return (possibly with 0 descriptors). */
struct notifier {
    const struct notifier_ops *ops;
};

struct notifier_ops {
    const char *name;
    bool edge;
    struct notifier *(*create)(int maxfd);
    void (*destroy)(struct notifier *n);
    int (*add)(struct notifier *n, int fd);
    int (*del)(struct notifier *n, int fd);
    int (*rearm)(struct notifier *n, int fd);
    int (*wait)(struct notifier *n, int *fds, int max, bool block); /* block = false: return at once */
    void (*wake)(struct notifier *n);
};

extern const struct notifier_ops notifier_select, notifier_poll, notifier_epoll_lt, notifier_epoll_et,
    notifier_uring;

_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One wait for events: every demultiplexing loop waits through here so the notify timings of all
 * patterns measure the same thing. A failing wait is fatal.  Uninstrumented: one blocking call.
 * With --instrument, waiting is kept apart from the notifier's service time: a non-blocking call
 * first; if it returns descriptors (the hot path under load: still one call) its time is `notify`,
 * bucketed by the exact count; if it returns none, the thread blocks in a second call, and the time
 * from the first call to the second's return is `idle` (CONTRACTS.md §1). */
static inline int notifier_wait_timed(struct notifier *nt, int *fds, int max)
{
    if (max > MAX_EVENTS)
        max = MAX_EVENTS;
    if (cur_ts->in == NULL) {
        int n = nt->ops->wait(nt, fds, max, true);
        if (n < 0)
            die("%s wait failed", nt->ops->name);
        return n;
    }
    uint64_t t0 = now_ns();
    int n = nt->ops->wait(nt, fds, max, false);
    if (n < 0)
        die("%s wait failed", nt->ops->name);
    if (n > 0) {
        instr_notify(t0, n);
        return n;
    }
    n = nt->ops->wait(nt, fds, max, true);
    if (n < 0)
        die("%s wait failed", nt->ops->name);
    instr_end(OP_IDLE, t0);
    instr_wait_events(n);
    return n;
}

/* eventfd kicks; a failed write means the counter is already non-zero, which
 * wakes the waiter just the same. */
static inline void efd_kick(int efd)
{
    uint64_t one = 1;
    ssize_t r = write(efd, &one, sizeof(one));
    (void)r;
}

static inline void efd_drain(int efd)
{
    uint64_t v;
    ssize_t r = read(efd, &v, sizeof(v));
    (void)r;
}

/* ---- connections ----------------------------------------------------- */

/* Slots are indexed by descriptor and live until exit, so a late event for a
 * closed descriptor never touches freed memory. */
struct conn {
    int fd;
    uint32_t have; /* bytes of the current message received */
    uint32_t sent; /* uring pattern: bytes of the echo sent */
    int home;      /* multireactor: the reactor owning it */
    char *buf;
    struct notifier *nt;
    /* Edge-triggered notifiers with several handler threads: events for one
     * connection may overlap, so the first claimant owns it and later ones
     * only leave a mark for the owner to loop on. */
    atomic_int claims;
    atomic_bool live;
    /* Hand-offs between threads, see conn_handoff(); odd while an arming
     * call (add or re-arm) is in flight, see conn_arming(). */
    atomic_uint handoff;
};

/* Ownership of a connection passes between threads through the kernel (a
 * re-arm or submission here, the event or completion there), an order the C
 * memory model, and so TSan, cannot see.  This release/acquire pair states it.
 * The release is a read-modify-write, not a store: a store would replace what
 * earlier releases published, and a late one (a thread that re-armed, was
 * preempted, and only then ran its second hand-off while the connection had
 * already passed through another thread) would hide that thread's accesses
 * from the next owner -- TSan then reports a race the kernel's ordering rules
 * out.  An RMW continues the release sequence instead (x86: one locked add).
 * A plain hand-off adds 2, so the count stays even outside arming calls. */
static inline void conn_handoff(struct conn *c)
{
    atomic_fetch_add_explicit(&c->handoff, 2, memory_order_release);
}

static inline void conn_takeover(struct conn *c)
{
    (void)atomic_load_explicit(&c->handoff, memory_order_acquire);
}

/* An arming call (the notifier's add or re-arm) hands the connection over
 * while it runs: the kernel reports the descriptor as soon as it is armed, so
 * the next owner may read EOF and close it before the call has returned.  The
 * call is bracketed by two hand-offs of 1 each -- the count is odd inside --
 * and conn_close() waits for it to be even: no call on a descriptor is in
 * flight in another thread when it is closed (and its number reused by the
 * next accept). */
static inline void conn_arming(struct conn *c)
{
    atomic_fetch_add_explicit(&c->handoff, 1, memory_order_release);
}

static inline bool conn_arming_in_flight(struct conn *c)
{
    return (atomic_load_explicit(&c->handoff, memory_order_acquire) & 1u) != 0;
}

enum rd { RD_MSG, RD_AGAIN, RD_CLOSED };

/* ---- the server ------------------------------------------------------ */

struct thr {
    pthread_t tid;
    int index;
    int cpu; /* -1 = not pinned */
    const char *role;
    void *(*fn)(void *);
    void *arg;
    struct tstat st;
    atomic_bool done;
    bool started; /* false for a slot from thr_reserve() */
};

struct pattern_ops;

struct server {
    const struct pattern_ops *pattern;
    const struct notifier_ops *nops; /* NULL for notifier none */
    const char *notifier_name;
    int threads;
    int port;
    const char *bind_addr;
    double work_us;
    uint32_t msg_size;
    bool instrument;
    int cpus[MAX_CPUS];
    int ncpus;
    int max_conns;

    int lfd;
    int reserve_fd;
    int nslots;
    struct conn *conns;
    atomic_int open_conns;

    struct thr thr[MAX_THREADS + 1]; /* + 1: tpc's acceptor besides its T slots */
    int nthr;
    void *pstate; /* the pattern's own state */
    struct tstat main_ts; /* main thread: closes at shutdown */
    uint64_t main_closed;
};

extern struct server srv;
extern atomic_bool g_stop;

static inline bool stopping(void)
{
    return atomic_load_explicit(&g_stop, memory_order_relaxed);
}

struct pattern_ops {
    const char *name;
    int min_threads, max_threads;
    const char *const *notifiers; /* NULL-terminated */
    int (*start)(struct server *s);
    void (*wake_all)(struct server *s); /* after g_stop is set */
    void (*cleanup)(struct server *s);  /* after every thread is joined */
};

extern const struct pattern_ops pattern_reactor, pattern_hsha, pattern_lf, pattern_tpc, pattern_proactor,
    pattern_uring, pattern_uring_shared, pattern_multireactor;

/* ---- helpers shared by the patterns (conn.c, main.c) ----------------- */

const struct notifier_ops *notifier_by_name(const char *name);
int spawn(struct server *s, const char *role, void *(*fn)(void *), void *arg);
/* A threads_detail entry with no thread of its own (started stays false):
 * tpc merges its short-lived connection threads into one per CPU slot. */
struct thr *thr_reserve(struct server *s, const char *role);
struct tinstr *tinstr_new(void); /* NULL when out of memory */
void tstat_merge(struct tstat *dst, const struct tstat *src);

struct conn *conn_open(struct server *s, int fd);
void conn_close(struct server *s, struct conn *c);
enum rd conn_read(struct server *s, struct conn *c);
int conn_respond(struct server *s, struct conn *c);

/* Accepts until the backlog is empty; each new connection is passed to
 * place(), which registers it (or closes it and returns -1). */
void accept_all(struct server *s, int (*place)(struct server *s, struct conn *c, void *arg), void *arg);
int accept_one(struct server *s); /* the descriptor, or -1 when the backlog is empty */

/* Serves one readiness report for a connection (not the listener) the way the
 * notifier needs: one message then rearm for deactivating notifiers, read to
 * EAGAIN for edge-triggered ones (claim-guarded when `shared`). */
void conn_ready(struct server *s, struct notifier *nt, struct conn *c, bool shared);
void conn_rearm(struct server *s, struct notifier *nt, struct conn *c);
int conn_arm(struct conn *c, struct notifier *nt);
void conn_drain(struct server *s, struct conn *c);

/* Claim protocol for edge-triggered notifiers, see struct conn. */
bool conn_claim(struct conn *c);
bool conn_release(struct conn *c, int *seen);

#endif
