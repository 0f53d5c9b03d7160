/* server.h -- what the patterns share with main.c: the server (its parsed
 * flags, connection table and threads), thread start-up, and a notifier made
 * for the server.  The concerns it gathers each have their own header:
 * config.h (flags), conn.h (connections), instr.h (counting and timing),
 * notifier.h (the notifier contract; the back-ends see only that one),
 * pattern.h (a pattern's operations). */
#ifndef DEMUX_SERVER_H
#define DEMUX_SERVER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "conn.h"
#include "efd.h"
#include "fatal.h"
#include "instr.h"
#include "notifier.h"
#include "pattern.h"

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

struct server {
    struct config cfg;
    struct conn_table ct;
    struct thr thr[MAX_THREADS + 1]; /* + 1: tpc's acceptor besides its T slots */
    int nthr;
    struct tstat main_ts; /* main thread: closes at shutdown */
    uint64_t main_closed;
};

static inline bool stopping(const struct server *s)
{
    return conns_stopping(&s->ct);
}

/* Starts a thread of the pattern (its threads_detail entry, pinned per --cpus,
 * counting into its own struct tstat); returns its index. */
int spawn(struct server *s, const char *role, void *(*fn)(void *), void *arg);
/* A threads_detail entry with no thread of its own (started stays false):
 * tpc merges its short-lived connection threads into one per CPU slot. */
struct thr *thr_reserve(struct server *s, const char *role);

/* A notifier of the configured kind, sized for the connection table, whose
 * interest-set lock is timed as `lock` and whose kicks as `kick`; NULL on
 * failure. */
static inline struct notifier *server_notifier(struct server *s)
{
    struct notifier_env env = {.maxfd = s->ct.nslots, .lock = lock_timed, .kick = instr_kick};
    return s->cfg.nops->create(&env);
}

#endif
