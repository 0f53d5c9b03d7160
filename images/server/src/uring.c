/* uring.c -- a true asynchronous Proactor on io_uring, distributed (seed 002's
 * lesson: distribute the demultiplexing and the event sources): T threads, each
 * with its OWN ring and its own share of the connections.  A thread submits
 * recv and send for its connections to its ring, waits for their completions,
 * and does the work inline, so no ring, lock or queue is shared on the hot path.
 * Thread 0 also owns the listener (an accept kept in flight on its ring) and
 * deals new connections out round-robin: a connection for another thread goes
 * into that thread's inbox (a mutex-protected array) and an eventfd write wakes
 * it (each ring keeps a read of its eventfd in flight).  A connection never
 * changes thread.  Every connection has at most one operation in flight.  A
 * message counts once its echo is submitted.  The single-ring design (one
 * completion thread + T-1 handlers) is pattern `uring-shared`.
 *
 * Each thread creates its own ring, so the ring can be single-issuer with
 * deferred task work (completions are run when the owner enters the kernel to
 * wait, not by interrupting it); a kernel without them (before 6.1) gets a
 * plain ring. */
#include "server.h"
#include "uring_conn.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>

struct uthr {
    struct io_uring ring;
    bool ring_ok;
    int efd;        /* kicked when the inbox has connections, or at shutdown */
    uint64_t efd_v; /* the in-flight eventfd read's buffer */
    pthread_mutex_t inbox_lock;
    int *inbox;
    int inbox_n, inbox_cap;
    int *batch; /* the owner's copy of the inbox */
};

struct uring_d {
    struct server *s;
    struct uthr *t;
    int n;
    int next; /* round-robin cursor, thread 0 only */
};

static struct uring_d U;

static void prep_accept(struct server *s, struct uthr *t)
{
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_accept(sqe, s->ct.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, uring_tag(s->ct.lfd, U_ACCEPT));
}

/* Out of descriptors: wait for the listener to become readable (UL_POLL). */
static void prep_listen_poll(struct server *s, struct uthr *t)
{
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_poll_add(sqe, s->ct.lfd, POLLIN);
    io_uring_sqe_set_data64(sqe, uring_tag(s->ct.lfd, U_LISTEN));
}

static void prep_inbox(struct uthr *t)
{
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_read(sqe, t->efd, &t->efd_v, sizeof(t->efd_v), 0);
    io_uring_sqe_set_data64(sqe, uring_tag(0, U_INBOX));
}

static void prep_recv(struct server *s, struct uthr *t, struct conn *c)
{
    uring_prep_recv(uring_sqe(&t->ring), &s->ct, c);
}

static void prep_send(struct server *s, struct uthr *t, struct conn *c)
{
    uring_prep_send(uring_sqe(&t->ring), &s->ct, c);
}

/* Thread 0: a new connection goes to the next thread in turn. */
static void deal(struct server *s, struct uthr *me, int fd)
{
    struct conn *c = conn_open(&s->ct, fd);
    if (c == NULL)
        return;
    int r = U.next;
    U.next = (U.next + 1) % U.n;
    struct uthr *t = &U.t[r];
    if (t == me) {
        prep_recv(s, me, c);
        return;
    }
    pthread_mutex_lock(&t->inbox_lock);
    if (t->inbox_n == t->inbox_cap) {
        int cap = t->inbox_cap ? 2 * t->inbox_cap : 64;
        int *in = realloc(t->inbox, (size_t)cap * sizeof(*in));
        int *b = realloc(t->batch, (size_t)cap * sizeof(*b));
        if (in != NULL)
            t->inbox = in;
        if (b != NULL)
            t->batch = b;
        if (in == NULL || b == NULL)
            die("out of memory for the inbox of uring thread %d", r);
        t->inbox_cap = cap;
    }
    t->inbox[t->inbox_n++] = fd;
    pthread_mutex_unlock(&t->inbox_lock);
    efd_kick(t->efd);
}

static void on_inbox(struct server *s, struct uthr *t)
{
    pthread_mutex_lock(&t->inbox_lock);
    int n = t->inbox_n;
    for (int i = 0; i < n; i++)
        t->batch[i] = t->inbox[i];
    t->inbox_n = 0;
    pthread_mutex_unlock(&t->inbox_lock);
    for (int i = 0; i < n; i++)
        prep_recv(s, t, conn_at(&s->ct, t->batch[i]));
    if (!stopping(s))
        prep_inbox(t);
}

static void on_accept(struct server *s, struct uthr *t, int res)
{
    enum uring_listen next;
    int fd = uring_accepted(&s->ct, res, &next);
    if (fd >= 0)
        deal(s, t, fd);
    if (next == UL_NONE || stopping(s))
        return;
    if (next == UL_POLL)
        prep_listen_poll(s, t);
    else
        prep_accept(s, t);
}

static void on_recv(struct server *s, struct uthr *t, struct conn *c, int res)
{
    switch (uring_recv_done(&s->ct, c, res)) {
    case US_RECV:
        prep_recv(s, t, c);
        break;
    case US_MESSAGE:
        conn_work(&s->ct);
        count_message();
        prep_send(s, t, c);
        break;
    case US_SEND:
    case US_CLOSED:
        break;
    }
}

static void on_send(struct server *s, struct uthr *t, struct conn *c, int res)
{
    switch (uring_send_done(&s->ct, c, res)) {
    case US_SEND:
        prep_send(s, t, c);
        break;
    case US_RECV:
        prep_recv(s, t, c);
        break;
    case US_MESSAGE:
    case US_CLOSED:
        break;
    }
}

static void ring_init(struct server *s, struct uthr *t, int index)
{
    /* Every connection of a thread can complete at once (its share, but the
     * deal is only even when no connection closes): room for all of them. */
    unsigned cq = (unsigned)s->ct.nslots + 64 > 8192 ? (unsigned)s->ct.nslots + 64 : 8192;
    unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
    unsigned extra = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = -EINVAL;
    for (int attempt = 0; attempt < 2 && rc == -EINVAL; attempt++) {
        struct io_uring_params p = {0};
        p.flags = base | (attempt == 0 ? extra : 0);
        p.cq_entries = cq;
        rc = io_uring_queue_init_params(1024, &t->ring, &p);
    }
    if (rc < 0)
        die("cannot create the io_uring of uring thread %d: %s", index, strerror(-rc));
    t->ring_ok = true;
    prep_inbox(t);
    if (index == 0)
        prep_accept(s, t);
}

static void *uring_loop(void *arg)
{
    struct server *s = U.s;
    int index = (int)(intptr_t)arg;
    struct uthr *t = &U.t[index];
    ring_init(s, t, index);
    while (!stopping(s)) {
        int ready = uring_wait_timed(&t->ring, true);
        struct io_uring_cqe *cqe;
        for (int n = 0; n < ready && !stopping(s) && io_uring_peek_cqe(&t->ring, &cqe) == 0; n++) {
            uint64_t ud = io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&t->ring, cqe);
            int fd = uring_tag_fd(ud);
            switch (uring_tag_op(ud)) {
            case U_ACCEPT:
                on_accept(s, t, res);
                break;
            case U_LISTEN:
                if (!stopping(s))
                    prep_accept(s, t);
                break;
            case U_RECV:
                on_recv(s, t, conn_at(&s->ct, fd), res);
                break;
            case U_SEND:
                on_send(s, t, conn_at(&s->ct, fd), res);
                break;
            case U_INBOX:
                on_inbox(s, t);
                break;
            case U_WAKE: /* the shared ring's only */
                break;
            }
        }
    }
    return NULL;
}

static int uring_start(struct server *s)
{
    U.s = s;
    U.n = s->cfg.threads;
    U.t = calloc((size_t)U.n, sizeof(*U.t));
    if (U.t == NULL)
        return -1;
    for (int i = 0; i < U.n; i++) {
        struct uthr *t = &U.t[i];
        /* Blocking: io_uring waits on it by polling.  A kick before the
         * thread has armed its read stays in the counter. */
        t->efd = eventfd(0, EFD_CLOEXEC);
        if (t->efd < 0)
            return -1;
        pthread_mutex_init(&t->inbox_lock, NULL);
    }
    for (int i = 0; i < U.n; i++)
        spawn(s, "proactor", uring_loop, (void *)(intptr_t)i);
    return 0;
}

static void uring_wake(struct server *s)
{
    (void)s;
    for (int i = 0; i < U.n; i++)
        efd_kick(U.t[i].efd);
}

static void uring_cleanup(struct server *s)
{
    (void)s;
    for (int i = 0; i < U.n; i++) {
        struct uthr *t = &U.t[i];
        if (t->ring_ok)
            io_uring_queue_exit(&t->ring);
        close(t->efd);
        pthread_mutex_destroy(&t->inbox_lock);
        free(t->inbox);
        free(t->batch);
    }
    free(U.t);
}

const struct pattern_ops pattern_uring = {
    .name = "uring",
    .min_threads = 1,
    .max_threads = 64,
    .notifiers = NOTIFIER_BIT(NOTIFIER_URING),
    .start = uring_start,
    .wake_all = uring_wake,
    .cleanup = uring_cleanup,
};
