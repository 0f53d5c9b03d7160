/* hsha.c -- Half-Sync/Half-Async (seed 000 Fig. 1-3, seed 001 §III-A): one
 * monitor thread waits on the notifier, caches every descriptor one call
 * returns and puts them into the shared queue one by one; T-1 workers take a
 * descriptor, read, work, respond and re-arm.  New connections are accepted by
 * the monitor itself.  Wake-ups follow --wake (images/README.md, "Fairness
 * rules"): by default the call's descriptors are queued and one sleeping
 * worker is woken after them, and relays (queue.h), as in the proactor;
 * `--wake put` wakes one per put. */
#include "queue.h"
#include "server.h"

struct hsha {
    struct notifier *nt;
    struct queue q;
};

static struct hsha H;

static int place(struct conn *c, void *arg)
{
    (void)arg;
    return conn_arm(c, H.nt);
}

static void *monitor_loop(void *arg)
{
    struct server *s = arg;
    struct notifier *nt = H.nt;
    int cache[MAX_EVENTS];
    while (!stopping(s)) {
        int n = notifier_wait_timed(nt, cache, MAX_EVENTS, &s->ct.stop);
        int queued = 0;
        for (int i = 0; i < n && !stopping(s); i++) {
            if (cache[i] == s->ct.lfd) {
                accept_all(&s->ct, place, NULL);
                if (!nt->ops->edge)
                    nt->ops->rearm(nt, s->ct.lfd);
            } else if (s->cfg.wake == WAKE_PUT) {
                queue_put(&H.q, cache[i]);
            } else {
                queue_put_deferred(&H.q, cache[i]);
                queued++;
            }
        }
        if (queued > 0)
            queue_kick(&H.q); /* one wake-up per call; workers relay it */
    }
    return NULL;
}

static void *worker_loop(void *arg)
{
    struct server *s = arg;
    for (;;) {
        int fd = queue_get(&H.q);
        if (fd < 0)
            break;
        conn_ready(&s->ct, H.nt, conn_at(&s->ct, fd), true);
    }
    return NULL;
}

static int hsha_start(struct server *s)
{
    H.nt = server_notifier(s);
    if (H.nt == NULL || H.nt->ops->add(H.nt, s->ct.lfd) < 0 || queue_init(&H.q, 1024) < 0)
        return -1;
    spawn(s, "monitor", monitor_loop, s);
    for (int i = 1; i < s->cfg.threads; i++)
        spawn(s, "worker", worker_loop, s);
    return 0;
}

static void hsha_wake(struct server *s)
{
    (void)s;
    H.nt->ops->wake(H.nt);
    queue_stop(&H.q);
}

static void hsha_cleanup(struct server *s)
{
    (void)s;
    H.nt->ops->destroy(H.nt);
    queue_destroy(&H.q);
}

const struct pattern_ops pattern_hsha = {
    .name = "hsha",
    .min_threads = 2,
    .max_threads = MAX_THREADS,
    .notifiers = NOTIFIERS_READINESS,
    .queued = true,
    .start = hsha_start,
    .wake_all = hsha_wake,
    .cleanup = hsha_cleanup,
};
