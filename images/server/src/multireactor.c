/* multireactor.c -- T reactors, each with its own notifier and its own share
 * of the connections.  Reactor 0 also owns the listener and deals new
 * connections out round-robin; after that a connection never changes reactor,
 * so no handler is shared and no claim is needed. */
#include "server.h"

#include <stdlib.h>

struct mreactor {
    struct server *s;
    struct notifier **nt;
    int n;
    int next; /* round-robin cursor, reactor 0 only */
};

static struct mreactor M;

static int place(struct conn *c, void *arg)
{
    (void)arg;
    int r = M.next;
    M.next = (M.next + 1) % M.n;
    return conn_arm(c, M.nt[r]);
}

static void *reactor_loop(void *arg)
{
    struct server *s = M.s;
    int me = (int)(intptr_t)arg;
    struct notifier *nt = M.nt[me];
    int fds[MAX_EVENTS];
    while (!stopping(s)) {
        int n = notifier_wait_timed(nt, fds, MAX_EVENTS, &s->ct.stop);
        for (int i = 0; i < n && !stopping(s); i++) {
            if (fds[i] == s->ct.lfd) {
                accept_all(&s->ct, place, NULL);
                if (!nt->ops->edge)
                    nt->ops->rearm(nt, s->ct.lfd);
            } else {
                conn_ready(&s->ct, nt, conn_at(&s->ct, fds[i]), false);
            }
        }
    }
    return NULL;
}

static int mr_start(struct server *s)
{
    M.s = s;
    M.n = s->cfg.threads;
    M.nt = calloc((size_t)M.n, sizeof(*M.nt));
    if (M.nt == NULL)
        return -1;
    for (int i = 0; i < M.n; i++) {
        M.nt[i] = server_notifier(s);
        if (M.nt[i] == NULL)
            return -1;
    }
    if (M.nt[0]->ops->add(M.nt[0], s->ct.lfd) < 0)
        return -1;
    for (int i = 0; i < M.n; i++)
        spawn(s, "reactor", reactor_loop, (void *)(intptr_t)i);
    return 0;
}

static void mr_wake(struct server *s)
{
    (void)s;
    for (int i = 0; i < M.n; i++)
        M.nt[i]->ops->wake(M.nt[i]);
}

static void mr_cleanup(struct server *s)
{
    (void)s;
    for (int i = 0; i < M.n; i++)
        M.nt[i]->ops->destroy(M.nt[i]);
    free(M.nt);
}

const struct pattern_ops pattern_multireactor = {
    .name = "multireactor",
    .min_threads = 1,
    .max_threads = 64,
    .notifiers = NOTIFIERS_READINESS,
    .start = mr_start,
    .wake_all = mr_wake,
    .cleanup = mr_cleanup,
};
