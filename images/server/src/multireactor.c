/* multireactor.c -- T reactors, each with its own notifier and its own share
 * of the connections.  Reactor 0 also owns the listener and deals new
 * connections out round-robin; after that a connection never changes reactor,
 * so no handler is shared and no claim is needed. */
#include "server.h"

#include <stdlib.h>

struct mreactor {
    struct notifier **nt;
    int n;
    int next; /* round-robin cursor, reactor 0 only */
};

static struct mreactor M;

static int place(struct server *s, struct conn *c, void *arg)
{
    (void)s;
    (void)arg;
    int r = M.next;
    M.next = (M.next + 1) % M.n;
    c->home = r;
    return conn_arm(c, M.nt[r]);
}

static void *reactor_loop(void *arg)
{
    struct server *s = &srv;
    int me = (int)(intptr_t)arg;
    struct notifier *nt = M.nt[me];
    int fds[MAX_EVENTS];
    while (!stopping()) {
        int n = notifier_wait_timed(nt, fds, MAX_EVENTS);
        for (int i = 0; i < n && !stopping(); i++) {
            if (fds[i] == s->lfd) {
                accept_all(s, place, NULL);
                if (!nt->ops->edge)
                    nt->ops->rearm(nt, s->lfd);
            } else {
                conn_ready(s, nt, &s->conns[fds[i]], false);
            }
        }
    }
    return NULL;
}

static int mr_start(struct server *s)
{
    M.n = s->threads;
    M.nt = calloc((size_t)M.n, sizeof(*M.nt));
    if (M.nt == NULL)
        return -1;
    for (int i = 0; i < M.n; i++) {
        M.nt[i] = s->nops->create(s->nslots);
        if (M.nt[i] == NULL)
            return -1;
    }
    if (M.nt[0]->ops->add(M.nt[0], s->lfd) < 0)
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

static const char *const notifiers[] = {"select", "poll", "epoll-lt", "epoll-et", "uring", NULL};

const struct pattern_ops pattern_multireactor = {
    .name = "multireactor",
    .min_threads = 1,
    .max_threads = 64,
    .notifiers = notifiers,
    .start = mr_start,
    .wake_all = mr_wake,
    .cleanup = mr_cleanup,
};
