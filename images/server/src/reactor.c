/* reactor.c -- Reactor: one thread demultiplexes and runs every handler. */
#include "server.h"

struct reactor {
    struct notifier *nt;
};

static struct reactor R;

static int place(struct conn *c, void *arg)
{
    struct notifier *nt = arg;
    return conn_arm(c, nt);
}

static void *reactor_loop(void *arg)
{
    struct server *s = arg;
    struct notifier *nt = R.nt;
    int fds[MAX_EVENTS];
    while (!stopping(s)) {
        int n = notifier_wait_timed(nt, fds, MAX_EVENTS, &s->ct.stop);
        for (int i = 0; i < n && !stopping(s); i++) {
            if (fds[i] == s->ct.lfd) {
                accept_all(&s->ct, place, nt);
                if (!nt->ops->edge)
                    nt->ops->rearm(nt, s->ct.lfd);
            } else {
                conn_ready(&s->ct, nt, conn_at(&s->ct, fds[i]), false);
            }
        }
    }
    return NULL;
}

static int reactor_start(struct server *s)
{
    R.nt = server_notifier(s);
    if (R.nt == NULL || R.nt->ops->add(R.nt, s->ct.lfd) < 0)
        return -1;
    spawn(s, "reactor", reactor_loop, s);
    return 0;
}

static void reactor_wake(struct server *s)
{
    (void)s;
    R.nt->ops->wake(R.nt);
}

static void reactor_cleanup(struct server *s)
{
    (void)s;
    R.nt->ops->destroy(R.nt);
}

const struct pattern_ops pattern_reactor = {
    .name = "reactor",
    .min_threads = 1,
    .max_threads = 1,
    .notifiers = NOTIFIERS_READINESS,
    .start = reactor_start,
    .wake_all = reactor_wake,
    .cleanup = reactor_cleanup,
};
