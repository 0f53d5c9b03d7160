/* notifier.h -- the notifier contract: everything a notifier back-end
 * (notify_*.c) sees, and everything a pattern needs of one.
 *
 * A back-end includes this header (and efd.h) and nothing of the server: no
 * configuration, no connection table, no statistics, no stop flag.  What it
 * needs from its user comes in through struct notifier_env when it is created
 * (the descriptor range, a hook that takes its interest-set lock, which the
 * server times as the `lock` operation, and one that writes a blocked
 * waiter's eventfd, timed as `kick`), the way redis' ae_epoll.c sees
 * only ae.h and the event loop it is handed.  tests/images/test_notifier_contract.py
 * compiles every back-end against this header alone and checks what its object
 * needs from outside; images/bench/notify_scale.c links the back-ends with no
 * server code at all.
 *
 * Contract: the caller registers descriptors armed for reading (add); a
 * descriptor reported by wait() is deactivated until it is armed again (select,
 * poll, epoll-lt, uring), except for edge-triggered notifiers (edge = true),
 * which report again on new data and need no rearm.  Arming again is either
 * rearm() (for reading, as add) or arm_write() (for writability instead: the
 * next report says the descriptor can take data, or has an error or hung up;
 * readability is not watched meanwhile, so a socket whose peer keeps sending is
 * not reported over and over while its reply waits).  Edge-triggered notifiers
 * take arm_write() the same way (the descriptor's interest becomes writability
 * alone, and it reports once that edge comes, or at once if it is writable
 * now), and rearm() then returns it to read interest, reporting it if it is
 * readable now; a pattern that drains to EAGAIN calls rearm() only after an
 * arm_write().  Only one thread waits on a notifier at a time; add, del, rearm
 * and arm_write may be called from any thread.  wake() makes a blocked wait()
 * return (possibly with 0 descriptors).  wait() returns at most `max`
 * descriptors, and at most MAX_EVENTS; a negative value is a failure.
 *
 * del() takes a descriptor that is not armed: never added, or reported by
 * wait() and not armed again since (for edge-triggered notifiers, any time).
 * select, poll and the epolls remove it either way; uring's del is a no-op that
 * relies on it, since its one-shot poll of an armed descriptor would still be in
 * the kernel and complete later, for a descriptor number that a new connection
 * may have by then.  (At shutdown every waiter has stopped and the notifier is
 * destroyed after the closes, so what is still armed then does no harm.)  The
 * server keeps it: a connection is closed only by the thread a report (or its
 * accept) gave it to. */
#ifndef DEMUX_NOTIFIER_H
#define DEMUX_NOTIFIER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stdbool.h>

#include "efd.h"

#define MAX_EVENTS 64 /* descriptors taken from one notifier call */

/* What the creator lends a back-end. */
struct notifier_env {
    int maxfd;                        /* descriptors are below this */
    void (*lock)(pthread_mutex_t *m); /* takes the interest-set lock; NULL: pthread_mutex_lock */
    void (*kick)(int efd);            /* wakes a blocked waiter to see a change (select, poll: an add, a
                                       * rearm or an arm_write while it waits); NULL: efd_kick */
};

struct notifier_ops;

/* The head of every back-end's state. */
struct notifier {
    const struct notifier_ops *ops;
    void (*lock)(pthread_mutex_t *m);
    void (*kick)(int efd);
};

struct notifier_ops {
    bool edge;
    struct notifier *(*create)(const struct notifier_env *env);
    void (*destroy)(struct notifier *n);
    int (*add)(struct notifier *n, int fd);
    int (*del)(struct notifier *n, int fd);
    int (*rearm)(struct notifier *n, int fd);
    int (*arm_write)(struct notifier *n, int fd); /* the next report: writable (see the contract) */
    int (*wait)(struct notifier *n, int *fds, int max, bool block); /* block = false: return at once */
    void (*wake)(struct notifier *n);
};

static inline void notifier_plain_lock(pthread_mutex_t *m)
{
    pthread_mutex_lock(m);
}

/* A back-end's create() fills the head with this. */
static inline void notifier_init(struct notifier *n, const struct notifier_ops *ops,
                                 const struct notifier_env *env)
{
    n->ops = ops;
    n->lock = env->lock != NULL ? env->lock : notifier_plain_lock;
    n->kick = env->kick != NULL ? env->kick : efd_kick;
}

/* The interest-set lock, through the creator's hook. */
static inline void notifier_lock(struct notifier *n, pthread_mutex_t *m)
{
    n->lock(m);
}

/* The kick of a waiter blocked in wait() after a change to the interest set, through the creator's hook
 * (not wake(): a stop is no change). */
static inline void notifier_kick(struct notifier *n, int efd)
{
    n->kick(efd);
}

/* ---- the table (notifiers.c) ----------------------------------------- */

/* The one list of notifier back-ends, one line each: X(ID, name, back-end).
 * The enum, the back-ends' declarations, the set every demultiplexing pattern
 * takes, the names (--list, the usage texts) and notifiers.c's table all come
 * from it, in this order.  A new notifier is its notify_*.c and a line here
 * (and its name in demuxlab.vocab.NOTIFIERS, docs/CONTRACTS.md §1). */
#define NOTIFIER_TABLE(X)                                                                                   \
    X(SELECT, "select", notifier_select)                                                                    \
    X(POLL, "poll", notifier_poll)                                                                          \
    X(EPOLL_LT, "epoll-lt", notifier_epoll_lt)                                                              \
    X(EPOLL_ET, "epoll-et", notifier_epoll_et)                                                              \
    X(URING, "uring", notifier_uring)

#define NOTIFIER_DECLARE_(id, name, ops) extern const struct notifier_ops ops;
NOTIFIER_TABLE(NOTIFIER_DECLARE_)
#undef NOTIFIER_DECLARE_

#define NOTIFIER_ENUM_(id, name, ops) NOTIFIER_##id,
enum notifier_id {
    NOTIFIER_TABLE(NOTIFIER_ENUM_)
    NOTIFIER_NONE, /* no notifier: tpc's blocking I/O (after the table's back-ends) */
    NOTIFIER_COUNT
};
#undef NOTIFIER_ENUM_

#define NOTIFIER_BIT(id) (1u << (id))
/* Every readiness notifier (every back-end of the table): the set of the demultiplexing patterns. */
#define NOTIFIER_READINESS_BIT_(id, name, ops) | NOTIFIER_BIT(NOTIFIER_##id)
#define NOTIFIERS_READINESS (0u NOTIFIER_TABLE(NOTIFIER_READINESS_BIT_))

struct notifier_kind {
    const char *name;
    const struct notifier_ops *ops; /* NULL for "none" */
};

extern const struct notifier_kind notifier_kinds[NOTIFIER_COUNT];

/* The entry named `name`, or -1. */
int notifier_find(const char *name);
/* The name of a back-end, for messages. */
const char *notifier_name(const struct notifier_ops *ops);

#endif
