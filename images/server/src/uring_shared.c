/* uring_shared.c -- pattern `uring-shared`, the first io_uring design kept for
 * comparison: a true asynchronous Proactor on ONE shared ring: accept, recv and
 * send are submitted to the kernel and one completion thread dispatches what they
 * complete.  A whole message goes to T-1 handler threads (or is handled
 * inline when T = 1), which spin the work and submit the echo.  Every
 * connection has at most one operation in flight (its recv, its send, or its
 * wait for writability), so its memory is its message buffer whatever its peer
 * does.  A message counts when its echo's last byte is sent (the completion
 * thread, at the send completion).  A handler submits each reply when its work
 * is done; inline (T = 1) with work, the replies go to the kernel before the
 * next message's work begins (uring_conn.h).  A send the socket will not take
 * waits for writability for up to --stall-ms, then the connection is closed as
 * stalled.
 * Wake-ups: the completion thread puts each whole message on the queue as it
 * meets it, and a put wakes a sleeping handler unless one is already being
 * woken (queue.h: a handler that leaves items behind wakes the next). */
#include "queue.h"
#include "server.h"
#include "uring_conn.h"

#include <errno.h>
#include <liburing.h>
#include <string.h>

struct uring_p {
    struct io_uring ring;
    pthread_mutex_t sq_lock; /* submission side: completion thread + handlers */
    struct queue done;
    bool inline_work;
    bool queued; /* messages put on the handlers' queue in this batch without a wake-up */
    bool replies; /* inline: echoes prepared since the last submit (the completion thread's) */
    struct __kernel_timespec stall; /* --stall-ms, for the waits for writability */
    pthread_mutex_t exit_lock;      /* the handlers still running, for the stop's count */
    pthread_cond_t exited;
    int handlers;
};

static struct uring_p U;

/* Prepared here, submitted in a batch before the completion thread waits. */
static void prep_accept(struct server *s)
{
    lock_timed(&U.sq_lock);
    uring_prep_accept(uring_sqe(&U.ring), s->ct.lfd);
    pthread_mutex_unlock(&U.sq_lock);
}

/* Out of descriptors: wait for the listener to become readable (UL_POLL). */
static void prep_listen_poll(struct server *s)
{
    lock_timed(&U.sq_lock);
    uring_prep_listen_poll(uring_sqe(&U.ring), s->ct.lfd);
    pthread_mutex_unlock(&U.sq_lock);
}

/* With --instrument the time sq_lock is held is timed: the receive's re-submission as `rearm` (here and
 * the completion thread's batch submit), the handler's submit of its echo, which runs the send inline, as
 * `send` (CONTRACTS.md §1): the lock's service time, which serialises the handlers on many cores. */
static void prep_recv(struct server *s, struct conn *c)
{
    lock_timed(&U.sq_lock);
    uint64_t t0 = instr_start();
    uring_prep_recv(uring_sqe(&U.ring), &s->ct, c);
    conn_handoff(c); /* after the last touch of c: the completion may run at once */
    instr_end(OP_REARM, t0);
    pthread_mutex_unlock(&U.sq_lock);
}

static void prep_send(struct server *s, struct conn *c, bool submit)
{
    lock_timed(&U.sq_lock);
    uint64_t t0 = instr_start();
    uring_prep_send(uring_sqe(&U.ring), &s->ct, c);
    conn_handoff(c);
    if (submit) {
        ur_submit(&U.ring);
        instr_end(OP_SEND, t0);
    }
    pthread_mutex_unlock(&U.sq_lock);
}

/* The socket took no more of the echo: the completion thread waits for it. */
static void prep_wait_writable(struct conn *c)
{
    lock_timed(&U.sq_lock);
    uring_prep_wait_writable(&U.ring, c->fd, false, &U.stall);
    conn_handoff(c);
    pthread_mutex_unlock(&U.sq_lock);
}

/* T = 1: a message's work in the completion thread; with work the replies
 * prepared before it go to the kernel first (uring_conn.h), else they would
 * wait behind it for the next wait. */
static void work_inline(struct server *s)
{
    if (U.replies && uring_replies_before_work(&s->cfg)) {
        lock_timed(&U.sq_lock);
        uint64_t t0 = instr_start();
        ur_submit(&U.ring);
        instr_end(OP_SEND, t0);
        pthread_mutex_unlock(&U.sq_lock);
        U.replies = false;
    }
    conn_work(&s->ct);
}

static void new_conn(struct server *s, int fd)
{
    struct conn *c = conn_open(&s->ct, fd);
    if (c != NULL)
        prep_recv(s, c);
}

static void on_accept(struct server *s, int res)
{
    enum uring_listen next;
    int fd = uring_accepted(&s->ct, res, &next);
    if (fd >= 0)
        new_conn(s, fd);
    if (next == UL_NONE || stopping(s))
        return;
    if (next == UL_POLL)
        prep_listen_poll(s);
    else
        prep_accept(s);
}

static void on_recv(struct server *s, struct conn *c, int res)
{
    switch (uring_recv_done(&s->ct, c, res)) {
    case US_RECV:
        prep_recv(s, c);
        break;
    case US_MESSAGE:
        if (U.inline_work) {
            work_inline(s);
            prep_send(s, c, false);
            U.replies = true;
        } else if (s->cfg.wake == WAKE_PUT) {
            queue_put(&U.done, c->fd);
        } else {
            queue_put_deferred(&U.done, c->fd); /* woken once after the batch (--wake batch) */
            U.queued = true;
        }
        break;
    case US_SEND:
    case US_WAIT:
    case US_CLOSED:
        break;
    }
}

static void on_send(struct server *s, struct conn *c, int res)
{
    switch (uring_send_done(&s->ct, c, res)) {
    case US_SEND:
        prep_send(s, c, false);
        break;
    case US_WAIT:
        prep_wait_writable(c);
        break;
    case US_RECV:
        prep_recv(s, c);
        break;
    case US_MESSAGE:
    case US_CLOSED:
        break;
    }
}

static void on_writable(struct server *s, struct conn *c, int res)
{
    if (uring_writable_done(&s->ct, c, res) == US_SEND)
        prep_send(s, c, false);
}

static void sent_unreaped(void *arg, int fd, uint32_t n)
{
    struct server *s = arg;
    struct conn *c = conn_at(&s->ct, fd);
    conn_takeover(c);
    uring_sent(&s->ct, c, n);
}

/* The stop: once every handler has made its last submit, the sends left in the
 * ring unreaped still count. */
static void count_at_stop(struct server *s)
{
    pthread_mutex_lock(&U.exit_lock);
    while (U.handlers > 0)
        pthread_cond_wait(&U.exited, &U.exit_lock);
    pthread_mutex_unlock(&U.exit_lock);
    uring_count_unreaped(&U.ring, sent_unreaped, s);
}

static void *completion_loop(void *arg)
{
    struct server *s = arg;
    while (!stopping(s)) {
        lock_timed(&U.sq_lock);
        uint64_t t0 = instr_start();
        if (ur_submit(&U.ring) > 0)
            instr_end(OP_REARM, t0); /* the receives prepared since the last wait */
        pthread_mutex_unlock(&U.sq_lock);
        U.replies = false;

        /* Handlers submit under sq_lock too; the wait itself only reads the completion side. */
        struct io_uring_cqe *cqe;
        int ready = uring_wait_timed(&U.ring, false);
        int n = 0;
        while (n < ready && !stopping(s) && ur_peek_cqe(&U.ring, &cqe) == 0) {
            uint64_t ud = io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&U.ring, cqe);
            n++;
            int fd = uring_tag_fd(ud);
            switch (uring_tag_op(ud)) {
            case U_ACCEPT:
                on_accept(s, res);
                break;
            case U_LISTEN:
                if (!stopping(s))
                    prep_accept(s);
                break;
            case U_RECV:
                conn_takeover(conn_at(&s->ct, fd));
                on_recv(s, conn_at(&s->ct, fd), res);
                break;
            case U_SEND:
                conn_takeover(conn_at(&s->ct, fd));
                on_send(s, conn_at(&s->ct, fd), res);
                break;
            case U_WRITABLE:
                conn_takeover(conn_at(&s->ct, fd));
                on_writable(s, conn_at(&s->ct, fd), res);
                break;
            case U_STALL: /* its poll's completion says what happened */
            case U_WAKE:
            case U_INBOX: /* the per-thread rings' only */
            case U_PROBE:
            case U_CANCEL:
                break;
            }
        }
        if (U.queued) { /* one wake-up per batch; a handler that leaves items behind wakes the next */
            queue_kick(&U.done);
            U.queued = false;
        }
    }
    count_at_stop(s);
    return NULL;
}

static void *handler_loop(void *arg)
{
    struct server *s = arg;
    for (;;) {
        int fd = queue_get(&U.done);
        if (fd < 0)
            break;
        conn_work(&s->ct);
        /* The completion thread may be blocked in wait: submit now. */
        prep_send(s, conn_at(&s->ct, fd), true);
    }
    pthread_mutex_lock(&U.exit_lock);
    U.handlers--;
    pthread_cond_signal(&U.exited);
    pthread_mutex_unlock(&U.exit_lock);
    return NULL;
}

static int uring_start(struct server *s)
{
    /* Every connection can complete at once, with a wait for writability's
     * timeout beside it: room for two each, as far as the kernel allows (CLAMP:
     * it refuses more than its maximum, 65,536 here, and nslots follows the
     * descriptor limit up to 1 M; completions beyond the ring wait in the
     * kernel's overflow list). */
    struct io_uring_params p = {0};
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
    unsigned cq = 2 * (unsigned)s->ct.nslots + 64;
    p.cq_entries = cq > 8192 ? cq : 8192;
    int rc = io_uring_queue_init_params(4096, &U.ring, &p);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    pthread_mutex_init(&U.sq_lock, NULL);
    pthread_mutex_init(&U.exit_lock, NULL);
    pthread_cond_init(&U.exited, NULL);
    U.handlers = s->cfg.threads - 1;
    if (queue_init(&U.done, 1024) < 0)
        return -1;
    U.inline_work = s->cfg.threads == 1;
    U.stall = uring_stall_timeout(&s->cfg);
    prep_accept(s);
    spawn(s, s->cfg.threads == 1 ? "proactor" : "completion", completion_loop, s);
    for (int i = 1; i < s->cfg.threads; i++)
        spawn(s, "handler", handler_loop, s);
    return 0;
}

static void uring_wake(struct server *s)
{
    (void)s;
    pthread_mutex_lock(&U.sq_lock);
    struct io_uring_sqe *sqe = uring_sqe(&U.ring);
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, uring_tag(0, U_WAKE));
    ur_submit(&U.ring);
    pthread_mutex_unlock(&U.sq_lock);
    queue_stop(&U.done);
}

static void uring_cleanup(struct server *s)
{
    (void)s;
    io_uring_queue_exit(&U.ring);
    pthread_mutex_destroy(&U.sq_lock);
    pthread_mutex_destroy(&U.exit_lock);
    pthread_cond_destroy(&U.exited);
    queue_destroy(&U.done);
}

const struct pattern_ops pattern_uring_shared = {
    .name = "uring-shared",
    .min_threads = 1,
    .max_threads = MAX_THREADS,
    .notifiers = NOTIFIER_BIT(NOTIFIER_URING),
    .start = uring_start,
    .wake_all = uring_wake,
    .cleanup = uring_cleanup,
    .queued = true, /* at T > 1: the handlers' queue (--wake) */
};
