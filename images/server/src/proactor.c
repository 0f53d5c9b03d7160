/* proactor.c -- emulated Proactor (seed 003, "TProactor"): the demultiplexer
 * waits for readiness, performs the non-blocking read itself and dispatches
 * "read completed" for each whole message to T-1 handler threads, which work,
 * send the response and re-arm the connection.  A partial message is kept in
 * the connection and its descriptor re-armed by the demultiplexer.  A reply
 * the socket will not take is parked (conn_park); its writability report comes
 * to the demultiplexer, which passes it to a handler to send on: the
 * demultiplexer reads, the handlers send.
 *
 * The demultiplexer is the pattern's bottleneck (it reads every message), so by
 * default (--wake batch) it queues a batch's messages without waking anyone and
 * wakes one sleeping handler per batch, which relays (queue.h).  Waking one
 * handler per message (--wake put: a futex wake, and the woken handler blocking
 * at once on the queue mutex the demultiplexer still held) put ~1.6 futex calls
 * per message on its path at 8 threads, growing with the handlers: the collapse
 * past 5 threads.
 *
 * Edge-triggered notifiers: the connection's claim (conn.h) is the right to
 * touch it, and it passes from the demultiplexer to a handler with the message
 * and back.  An edge that finds the connection claimed only counts itself into
 * the claim.  A handler never reads: when its echo is out it lets go of the
 * claim only if the demultiplexer's read had left the socket empty and no edge
 * came since; otherwise it hands the connection back to the demultiplexer
 * through the inbox (and wakes it), which reads the next message.  So under
 * every notifier the demultiplexer does every read (before 2026-12 a handler
 * under epoll-et read and served the messages that came while it held the
 * connection: HSHA in effect). */
#include "queue.h"
#include "server.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Connections a handler gives back to the demultiplexer (edge-triggered), claim held.  Its eventfd is one
 * of the notifier's descriptors, written when the inbox stops being empty: a report like any other, not
 * the notifier's wake(), which an instrumented wait's first call may take (instr.h). */
struct inbox {
    pthread_mutex_t lock;
    int *fds;
    int n, cap;
    atomic_int count; /* n, for the demultiplexer's look without the lock */
    int efd;
};

struct proactor {
    struct notifier *nt;
    struct queue done; /* connections holding a whole message, or a parked echo to send on */
    struct inbox back;
};

static struct proactor P;

static int place(struct conn *c, void *arg)
{
    (void)arg;
    return conn_arm(c, P.nt);
}

static void dispatch(struct server *s, struct conn *c, int *queued)
{
    if (s->cfg.wake == WAKE_PUT) {
        queue_put(&P.done, c->fd);
    } else {
        queue_put_deferred(&P.done, c->fd);
        (*queued)++;
    }
}

/* Edge-triggered, claim held by the demultiplexer: a parked echo goes to a handler; else read until a
 * whole message goes to a handler (the claim with it, and what the read saw: see handler_edge), or the
 * claim can be let go. */
static void serve_claimed(struct server *s, struct conn *c, int *queued)
{
    int seen = atomic_load_explicit(&c->claims, memory_order_acquire);
    do {
        if (!atomic_load_explicit(&c->live, memory_order_acquire))
            continue;
        if (c->wblocked) {
            c->claims_seen = seen;
            dispatch(s, c, queued);
            return;
        }
        switch (conn_read_edge(&s->ct, c)) {
        case RD_MSG:
            c->claims_seen = seen;
            dispatch(s, c, queued);
            return;
        case RD_AGAIN:
            break;
        case RD_CLOSED:
            conn_close(&s->ct, c);
            break;
        }
    } while (!conn_release(c, &seen));
}

static void take_back(struct server *s, int *queued)
{
    if (atomic_load_explicit(&P.back.count, memory_order_acquire) == 0)
        return;
    int fds[MAX_EVENTS];
    for (;;) {
        lock_timed(&P.back.lock);
        int n = P.back.n < MAX_EVENTS ? P.back.n : MAX_EVENTS; /* oldest first */
        memcpy(fds, P.back.fds, (size_t)n * sizeof(fds[0]));
        P.back.n -= n;
        memmove(P.back.fds, P.back.fds + n, (size_t)P.back.n * sizeof(fds[0]));
        atomic_store_explicit(&P.back.count, P.back.n, memory_order_release);
        pthread_mutex_unlock(&P.back.lock);
        for (int i = 0; i < n; i++) {
            struct conn *c = conn_at(&s->ct, fds[i]);
            conn_takeover(c);
            serve_claimed(s, c, queued);
        }
        if (n < MAX_EVENTS)
            return;
    }
}

static void give_back(struct conn *c)
{
    lock_timed(&P.back.lock);
    if (P.back.n == P.back.cap) {
        int cap = P.back.cap > 0 ? 2 * P.back.cap : 64;
        int *fds = realloc(P.back.fds, (size_t)cap * sizeof(*fds));
        if (fds == NULL)
            die("out of memory growing the proactor's inbox to %d entries", cap);
        P.back.fds = fds;
        P.back.cap = cap;
    }
    P.back.fds[P.back.n++] = c->fd;
    bool first = P.back.n == 1;
    atomic_store_explicit(&P.back.count, P.back.n, memory_order_release);
    conn_handoff(c);
    pthread_mutex_unlock(&P.back.lock);
    if (first)
        efd_kick(P.back.efd); /* the demultiplexer may be blocked in the notifier */
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
            if (fds[i] == P.back.efd) {
                efd_drain(P.back.efd); /* each write raises a new edge; the inbox is looked at below */
                continue;
            }
            struct conn *c = conn_at(&s->ct, fds[i]);
            conn_takeover(c);
            if (nt->ops->edge) {
                /* A claimed connection is a handler's (or in the inbox): the edge counts into the
                 * claim, and the handler gives the connection back to be read. */
                if (conn_claim(c))
                    serve_claimed(s, c, &queued);
                continue;
            }
            if (c->wblocked) { /* its echo can go on: a handler's job */
                dispatch(s, c, &queued);
                continue;
            }
            switch (conn_read(&s->ct, c)) {
            case RD_MSG:
                dispatch(s, c, &queued);
                break;
            case RD_AGAIN:
                conn_rearm(&s->ct, nt, c);
                break;
            case RD_CLOSED:
                conn_close(&s->ct, c);
                break;
            }
        }
        if (nt->ops->edge && !stopping(s))
            take_back(s, &queued);
        if (queued > 0)
            queue_kick(&P.done); /* one wake-up per batch; handlers relay it */
    }
    return NULL;
}

/* Edge-triggered, claim held, the connection closed here: lets go of the claim.  An edge that came
 * meanwhile may be a new connection's that took the descriptor's number (the demultiplexer accepts while a
 * handler closes), counted into this claim: that one is the demultiplexer's to read, so the claim goes
 * back to it (serve_claimed reads a live connection and lets go of a closed one) instead of being wiped. */
static void let_go_closed(struct conn *c, int seen)
{
    if (!conn_release(c, &seen))
        give_back(c);
}

/* Edge-triggered, claim held: work and echo (or send on), then let go or give back; a parked echo lets
 * go (its writability edge comes to the demultiplexer) unless an edge came meanwhile, which may have been
 * that one: then it sends on at once. */
static void handler_edge(struct server *s, struct conn *c)
{
    struct notifier *nt = P.nt;
    int seen = c->claims_seen;
    bool resumed = c->wblocked;
    enum wr r = resumed ? conn_resume(&s->ct, c) : conn_respond(&s->ct, c);
    for (;;) {
        switch (r) {
        case WR_FAILED:
            conn_close(&s->ct, c);
            let_go_closed(c, seen);
            return;
        case WR_BLOCKED:
            conn_park(&s->ct, nt, c);
            if (!atomic_load_explicit(&c->live, memory_order_acquire)) { /* the arm failed: closed */
                let_go_closed(c, seen);
                return;
            }
            if (conn_release(c, &seen))
                return;
            resumed = true;
            r = conn_resume(&s->ct, c);
            continue;
        case WR_DONE:
            /* A resumed echo gives the connection its read interest back first (conn_drain's rule); the
             * demultiplexer then reads what came meanwhile (conn_park left `drained` false). */
            if (resumed) {
                conn_rearm(&s->ct, nt, c);
                if (!atomic_load_explicit(&c->live, memory_order_acquire)) {
                    let_go_closed(c, seen);
                    return;
                }
            }
            if (c->drained && conn_release(c, &seen))
                return; /* empty at the read, and no edge since: the next arrival's edge finds it free */
            give_back(c);
            return;
        }
    }
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
        conn_takeover(c);
        if (nt->ops->edge) {
            handler_edge(s, c);
            continue;
        }
        conn_replied(&s->ct, nt, c, c->wblocked ? conn_resume(&s->ct, c) : conn_respond(&s->ct, c));
    }
    return NULL;
}

static int proactor_start(struct server *s)
{
    P.nt = server_notifier(s);
    if (P.nt == NULL || P.nt->ops->add(P.nt, s->ct.lfd) < 0 || queue_init(&P.done, 1024) < 0)
        return -1;
    pthread_mutex_init(&P.back.lock, NULL);
    P.back.efd = -1;
    if (P.nt->ops->edge) {
        P.back.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (P.back.efd < 0 || P.nt->ops->add(P.nt, P.back.efd) < 0)
            return -1;
    }
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
    pthread_mutex_destroy(&P.back.lock);
    free(P.back.fds);
    if (P.back.efd >= 0)
        close(P.back.efd);
}

const struct pattern_ops pattern_proactor = {
    .name = "proactor",
    .min_threads = 2,
    .max_threads = MAX_THREADS,
    .notifiers = NOTIFIERS_READINESS,
    .queued = true,
    .start = proactor_start,
    .wake_all = proactor_wake,
    .cleanup = proactor_cleanup,
};
