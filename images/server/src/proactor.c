/* proactor.c -- emulated Proactor (seed 003, "TProactor"): the demultiplexer
 * waits for readiness, performs the non-blocking read itself and dispatches
 * "read completed" for each whole message to T-1 handler threads, which work,
 * send the response and re-arm the connection.  A partial message is kept in
 * the connection and its descriptor re-armed by the demultiplexer.
 *
 * The demultiplexer is the pattern's bottleneck (it reads every message), so
 * it queues a batch's messages without waking anyone and wakes one sleeping
 * handler per batch, which relays (queue.h).  Waking one handler per message
 * (a futex wake, and the woken handler blocking at once on the queue mutex the
 * demultiplexer still held) put ~1.6 futex calls per message on its path at
 * 8 threads, growing with the handlers: the collapse past 5 threads. */
#include "queue.h"
#include "server.h"

struct proactor {
    struct notifier *nt;
    struct queue done; /* connections holding a whole message */
};

static struct proactor P;

static int place(struct conn *c, void *arg)
{
    (void)arg;
    return conn_arm(c, P.nt);
}

/* Edge-triggered: the demultiplexer reads only when it can claim the
 * connection; a busy handler will read the new data itself. */
static bool read_edge(struct server *s, struct conn *c)
{
    if (!conn_claim(c))
        return false;
    int seen = atomic_load_explicit(&c->claims, memory_order_acquire);
    do {
        if (!atomic_load_explicit(&c->live, memory_order_acquire))
            continue;
        switch (conn_read_edge(&s->ct, c)) {
        case RD_MSG:
            /* The claim goes with it, and what the read saw: a handler that
             * finds the socket was left empty and no claim came since skips
             * its first drain. */
            c->claims_seen = seen;
            queue_put_deferred(&P.done, c->fd);
            return true;
        case RD_AGAIN:
            break;
        case RD_CLOSED:
            conn_close(&s->ct, c);
            break;
        }
    } while (!conn_release(c, &seen));
    return false;
}

static void *demux_loop(void *arg)
{
    struct server *s = arg;
    struct notifier *nt = P.nt;
    int fds[MAX_EVENTS];
    while (!stopping(s)) {
        int n = notifier_wait_timed(nt, fds, MAX_EVENTS, &s->ct.stop);
        int queued = 0;
        for (int i = 0; i < n && !stopping(s); i++) {
            if (fds[i] == s->ct.lfd) {
                accept_all(&s->ct, place, NULL);
                if (!nt->ops->edge)
                    nt->ops->rearm(nt, s->ct.lfd);
                continue;
            }
            struct conn *c = conn_at(&s->ct, fds[i]);
            conn_takeover(c);
            if (nt->ops->edge) {
                queued += read_edge(s, c);
                continue;
            }
            switch (conn_read(&s->ct, c)) {
            case RD_MSG:
                queue_put_deferred(&P.done, c->fd);
                queued++;
                break;
            case RD_AGAIN:
                conn_rearm(&s->ct, nt, c);
                break;
            case RD_CLOSED:
                conn_close(&s->ct, c);
                break;
            }
        }
        if (queued > 0)
            queue_kick(&P.done); /* one wake-up per batch; handlers relay it */
    }
    return NULL;
}

static void *handler_loop(void *arg)
{
    struct server *s = arg;
    struct notifier *nt = P.nt;
    for (;;) {
        int fd = queue_get(&P.done);
        if (fd < 0)
            break;
        struct conn *c = conn_at(&s->ct, fd);
        if (conn_respond(&s->ct, c) < 0) {
            conn_close(&s->ct, c);
            if (!nt->ops->edge)
                continue;
        } else if (!nt->ops->edge) {
            conn_rearm(&s->ct, nt, c);
            continue;
        }
        /* Edge-triggered: we own the claim; data that came meanwhile raised
         * no new edge for us, so read on until the socket is empty before
         * letting go.  If the demultiplexer's read already left it empty, any
         * data since then made a claim after `claims_seen` (its edge found
         * the connection claimed), and the release fails into a drain. */
        bool skip = c->drained;
        int seen = skip ? c->claims_seen : atomic_load_explicit(&c->claims, memory_order_acquire);
        do {
            if (!skip && atomic_load_explicit(&c->live, memory_order_acquire))
                conn_drain(&s->ct, c);
            skip = false;
        } while (!conn_release(c, &seen));
    }
    return NULL;
}

static int proactor_start(struct server *s)
{
    P.nt = server_notifier(s);
    if (P.nt == NULL || P.nt->ops->add(P.nt, s->ct.lfd) < 0 || queue_init(&P.done, 1024) < 0)
        return -1;
    spawn(s, "demultiplexer", demux_loop, s);
    for (int i = 1; i < s->cfg.threads; i++)
        spawn(s, "handler", handler_loop, s);
    return 0;
}

static void proactor_wake(struct server *s)
{
    (void)s;
    P.nt->ops->wake(P.nt);
    queue_stop(&P.done);
}

static void proactor_cleanup(struct server *s)
{
    (void)s;
    P.nt->ops->destroy(P.nt);
    queue_destroy(&P.done);
}

const struct pattern_ops pattern_proactor = {
    .name = "proactor",
    .min_threads = 2,
    .max_threads = MAX_THREADS,
    .notifiers = NOTIFIERS_READINESS,
    .start = proactor_start,
    .wake_all = proactor_wake,
    .cleanup = proactor_cleanup,
};
