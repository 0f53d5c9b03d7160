/* instr.h -- what each thread counts (messages, connections) and, with
 * --instrument, times: one histogram per operation (docs/CONTRACTS.md §1,
 * `ops`).  Every thread binds its own struct tstat once (instr_bind); the
 * counters and histograms are then written only by that thread and merged
 * after the join, so no atomics are needed.
 *
 * Adding an operation timing: a value in enum op (before OP_COUNT), its JSON
 * name in op_names (instr.c), and instr_start()/instr_end(OP_X, t0) around it.
 * The exit JSON prints every operation whose histogram is not empty, in enum
 * order; nothing else needs to change. */
#ifndef DEMUX_INSTR_H
#define DEMUX_INSTR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fatal.h"
#include "hist.h"
#include "notifier.h"
#include "sysc.h"
#include "util.h"

enum op {
    OP_NOTIFY,
    OP_LOCK,
    OP_QUEUE_PUT,
    OP_QUEUE_GET,
    OP_PROMOTE,
    OP_RECV,
    OP_REARM,
    OP_WORK,
    OP_WORK_CPU, /* not an operation: the CPU time of each `work`, as its spin counted it (spin_cpu_us) */
    OP_SEND,
    OP_ACCEPT,
    OP_IDLE,
    OP_KICK,
    OP_COUNT
};

extern const char *const op_names[OP_COUNT];

/* Allocated only with --instrument: the histograms are ~20 KiB each. */
struct tinstr {
    struct hist ops[OP_COUNT];
    uint64_t calls;                       /* notifier calls */
    uint64_t events;                      /* descriptors they returned */
    uint64_t events_max;
    uint64_t by_events_n[MAX_EVENTS + 1]; /* index = events returned (exact: a call returns at most MAX_EVENTS) */
    uint64_t by_events_ns[MAX_EVENTS + 1];
    uint64_t kick_wall_ns; /* wall time inside this thread's kicks so far: kept out of its `rearm` */
};

struct tstat {
    uint64_t messages;
    uint64_t accepted;
    uint64_t closed;
    uint64_t stalled; /* of those closed: closed because they would not take their reply (--stall-ms) */
    double user_s, sys_s;
    double wait_s;     /* runnable but waiting for a CPU (schedstat run_delay); < 0: unknown */
    long sleeps;       /* voluntary context switches (it blocked and was woken); < 0: unknown */
    uint64_t syscalls; /* the system calls it made, counted where it made them (sysc.h), set at its end */
    struct tinstr *in; /* NULL without --instrument */
};

/* The calling thread's statistics; set by instr_bind() before the thread
 * counts anything (it registers the thread's system-call counter too, sysc.h). */
extern _Thread_local struct tstat *instr_ts;

static inline void instr_bind(struct tstat *ts)
{
    instr_ts = ts;
    sysc_register();
}

static inline bool instr_on(void)
{
    return instr_ts->in != NULL;
}

static inline uint64_t instr_start(void)
{
    return instr_ts->in ? now_ns() : 0;
}

static inline void instr_end(enum op op, uint64_t t0)
{
    if (instr_ts->in)
        hist_add(&instr_ts->in->ops[op], now_ns() - t0);
}

/* A value measured by other means (no clock read here): `ns` into op's histogram. */
static inline void instr_add(enum op op, uint64_t ns)
{
    if (instr_ts->in)
        hist_add(&instr_ts->in->ops[op], ns);
}

/* The wall time this thread has spent in kicks (instr_kick), for an operation that may kick: its own time
 * is from instr_start() to now less what the kicks took since (instr_end_less). */
static inline uint64_t instr_kick_wall(void)
{
    return instr_ts->in ? instr_ts->in->kick_wall_ns : 0;
}

static inline void instr_end_less(enum op op, uint64_t t0, uint64_t kick_wall0)
{
    if (instr_ts->in)
        hist_add(&instr_ts->in->ops[op], now_ns() - t0 - (instr_ts->in->kick_wall_ns - kick_wall0));
}

/* A notifier call that returned nevents descriptors without blocking: its
 * service time, bucketed by the count. */
void instr_notify(uint64_t t0, int nevents);
/* One wait's descriptors, for events_per_call (every wait, blocked or not). */
void instr_wait_events(int nevents);

static inline void count_message(void)
{
    instr_ts->messages++;
}

static inline void count_accepted(void)
{
    instr_ts->accepted++;
}

static inline void count_closed(void)
{
    instr_ts->closed++;
}

/* A connection closed because it did not take its reply within --stall-ms (also counted as closed). */
static inline void count_stalled(void)
{
    instr_ts->stalled++;
}

/* pthread_mutex_lock, with the wait counted as the `lock` operation (also the
 * notifiers' interest-set lock hook, struct notifier_env). */
static inline void lock_timed(pthread_mutex_t *m)
{
    uint64_t t0 = instr_start();
    pthread_mutex_lock(m);
    instr_end(OP_LOCK, t0);
}

/* The notifiers' kick hook (struct notifier_env): writes a blocked waiter's
 * eventfd, timed as the `kick` operation in the kicker's CPU time, not wall
 * time: on a shared core the woken waiter may preempt the kicker inside the
 * write, and wall time would count the waiter's run (CONTRACTS.md §1).  Its
 * wall time is kept out of the `rearm` that kicked (instr_end_less). */
void instr_kick(int efd);

struct tinstr *tinstr_new(void); /* NULL when out of memory */
void tinstr_merge(struct tinstr *dst, const struct tinstr *src);
void tstat_merge(struct tstat *dst, const struct tstat *src);
/* At the end of the calling thread: its CPU times, wait for a CPU, sleeps and system calls into ts. */
void tstat_close(struct tstat *ts);

/* One wait for events: every demultiplexing loop waits through here so the notify timings of all
 * patterns measure the same thing. A failing wait is fatal.  Uninstrumented: one blocking call.
 * With --instrument, waiting is kept apart from the notifier's service time: a non-blocking call
 * first; if it returns descriptors (the hot path under load: still one call) its time is `notify`,
 * bucketed by the exact count; if it returns none, the thread blocks in a second call, and the time
 * from the first call to the second's return is `idle` (CONTRACTS.md §1).
 *
 * `stop` is the server's stop flag: the stop's wake() comes after it is set, and the first call can
 * take that wake-up (every back-end drains its kick, or reaps its no-op, in any wait); the second would
 * then block for good.  So a stop seen between the two calls returns 0, as a woken wait does. */
static inline int notifier_wait_timed(struct notifier *nt, int *fds, int max, const atomic_bool *stop)
{
    if (max > MAX_EVENTS)
        max = MAX_EVENTS;
    if (!instr_on()) {
        int n = nt->ops->wait(nt, fds, max, true);
        if (n < 0)
            die("%s wait failed", notifier_name(nt->ops));
        return n;
    }
    uint64_t t0 = now_ns();
    int n = nt->ops->wait(nt, fds, max, false);
    if (n < 0)
        die("%s wait failed", notifier_name(nt->ops));
    if (n > 0) {
        instr_notify(t0, n);
        return n;
    }
    if (atomic_load(stop))
        return 0;
    n = nt->ops->wait(nt, fds, max, true);
    if (n < 0)
        die("%s wait failed", notifier_name(nt->ops));
    instr_end(OP_IDLE, t0);
    instr_wait_events(n);
    return n;
}

#endif
