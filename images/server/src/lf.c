/* lf.c -- Leader/Followers (seed 000 Fig. 4-5, seed 001 §III-B): T identical
 * threads; the one holding the leader lock takes a descriptor from the cache
 * of the last notifier call (calling the notifier only when the cache is
 * empty), promotes a follower by releasing the lock, and processes the event
 * in parallel with the others. */
#include "server.h"

struct lf {
    struct notifier *nt;
    pthread_mutex_t leader;
    int cache[MAX_EVENTS]; /* guarded by the leader lock */
    int cached, next;
};

static struct lf L;

static int place(struct conn *c, void *arg)
{
    (void)arg;
    return conn_arm(c, L.nt);
}

static void *lf_loop(void *arg)
{
    struct server *s = arg;
    struct notifier *nt = L.nt;
    for (;;) {
        lock_timed(&L.leader);
        int fd = -1;
        while (!stopping(s)) {
            if (L.next < L.cached) {
                fd = L.cache[L.next++];
                if (fd != s->ct.lfd)
                    break;
                /* The leader accepts before promoting, so only one thread
                 * ever runs the accept loop. */
                accept_all(&s->ct, place, NULL);
                if (!nt->ops->edge)
                    nt->ops->rearm(nt, s->ct.lfd);
                fd = -1;
                continue;
            }
            int n = notifier_wait_timed(nt, L.cache, MAX_EVENTS, &s->ct.stop);
            L.cached = n;
            L.next = 0;
        }
        uint64_t t0 = instr_start();
        pthread_mutex_unlock(&L.leader);
        instr_end(OP_PROMOTE, t0);
        if (fd < 0)
            break;
        conn_ready(&s->ct, nt, conn_at(&s->ct, fd), true);
    }
    return NULL;
}

static int lf_start(struct server *s)
{
    L.nt = server_notifier(s);
    if (L.nt == NULL || L.nt->ops->add(L.nt, s->ct.lfd) < 0)
        return -1;
    pthread_mutex_init(&L.leader, NULL);
    for (int i = 0; i < s->cfg.threads; i++)
        spawn(s, "leader-follower", lf_loop, s);
    return 0;
}

static void lf_wake(struct server *s)
{
    (void)s;
    L.nt->ops->wake(L.nt);
}

static void lf_cleanup(struct server *s)
{
    (void)s;
    L.nt->ops->destroy(L.nt);
    pthread_mutex_destroy(&L.leader);
}

const struct pattern_ops pattern_lf = {
    .name = "lf",
    .min_threads = 1,
    .max_threads = MAX_THREADS,
    .notifiers = NOTIFIERS_READINESS,
    .start = lf_start,
    .wake_all = lf_wake,
    .cleanup = lf_cleanup,
};
