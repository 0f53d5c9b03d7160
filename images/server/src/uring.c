/* uring.c -- a true asynchronous Proactor on io_uring, distributed (seed 002's
 * lesson: distribute the demultiplexing and the event sources): T threads, each
 * with its OWN ring and its own share of the connections.  A thread submits
 * recv and send for its connections to its ring, waits for their completions,
 * and does the work inline, so no ring, lock or queue is shared on the hot path.
 * Thread 0 also owns the listener (an accept kept in flight on its ring) and
 * deals new connections out round-robin: a connection for another thread goes
 * into that thread's inbox (a mutex-protected array) and an eventfd write wakes
 * it (each ring keeps a read of its eventfd in flight).  A connection never
 * changes thread.  A message counts when its echo's last byte is sent (the send
 * completion that takes it).  The single-ring design (one completion thread +
 * T-1 handlers) is pattern `uring-shared`.
 *
 * io_uring as it is meant for this load (issue 24), each feature probed when a
 * thread creates its ring and recorded in the exit JSON (`uring`, CONTRACTS.md
 * §1); what the kernel lacks falls back to the plain form:
 *  - single issuer with deferred task work: completions run when the owner
 *    enters the kernel to wait, not by interrupting it (6.1; else a plain ring);
 *  - a registered ring descriptor: io_uring_enter skips the descriptor lookup
 *    (5.18);
 *  - multishot receive with a ring of provided buffers (6.0; 5.19 for the
 *    buffer ring): one receive stays armed per connection for its whole life,
 *    each arrival completes into a buffer the kernel picks, which the thread
 *    copies into the connection's echo and hands back at once.  Without it:
 *    one single-shot recv per message part, into the connection's buffer, as
 *    before (at most one operation in flight per connection);
 *  - registered (fixed) files: the sockets sit in the ring's file table (slot =
 *    descriptor), so a send or receive takes no file reference (5.19 for the
 *    sparse table);
 *  - without work (W = 0) sends are prepared while a completion batch is
 *    processed and go to the kernel with the next wait, one io_uring_enter per
 *    batch; with work, the replies prepared so far are submitted before the
 *    next message's work begins (work(); uring_conn.h: no finished reply
 *    waits behind another message's work).
 * With multishot receive a connection may have its receive and one send in
 * flight; whole messages that arrive while a send is in flight wait in a
 * second buffer (with work: not yet worked on) and go out when it completes,
 * in order (with work one message per send, else all of them).  That backlog
 * is bounded (backlog_max: 4 messages, at least 256 KiB): a connection whose
 * peer does not read its echoes stops being received from (its multishot
 * receive is cancelled) until the backlog is down to half, then it is armed
 * again.  Sends are made with MSG_DONTWAIT: one the socket will not take ends
 * with EAGAIN and the connection waits for writability (a poll linked to a
 * --stall-ms timeout); one whose wait the timeout ends is closed and counted
 * as stalled.  A connection is closed once neither a receive nor a send (or
 * its wait) is in flight: the receive ends (end of stream, an error), or a
 * failed or stalled send shuts the socket down so that the receive ends.  A
 * receive that finds no free buffer ends with ENOBUFS and is armed again
 * (`buffers_exhausted`). */
#include "server.h"
#include "uring_conn.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#define PBUF_SIZE 2048u      /* bytes per provided buffer */
#define PBUF_COUNT 1024u     /* provided buffers per ring (DEMUX_URING_BUFS for tests) */
#define PBUF_GROUP 0         /* each ring has its own group 0 */
#define FIXED_SLOTS_MAX 65536 /* file table per ring: descriptors below this are registered */
#define BACKLOG_MSGS 4        /* a connection's unsent echoes, in messages, before it is paused ... */
#define BACKLOG_MIN (256u << 10) /* ... or in bytes, whichever is more */

enum ufeat {
    UF_SINGLE_ISSUER,
    UF_DEFER_TASKRUN,
    UF_REGISTERED_RING,
    UF_BUF_RING,
    UF_RECV_MULTISHOT,
    UF_FIXED_FILES,
    UF_COUNT
};

static const char *const ufeat_names[UF_COUNT] = {
    [UF_SINGLE_ISSUER] = "single_issuer", [UF_DEFER_TASKRUN] = "defer_taskrun",
    [UF_REGISTERED_RING] = "registered_ring", [UF_BUF_RING] = "buf_ring",
    [UF_RECV_MULTISHOT] = "recv_multishot",   [UF_FIXED_FILES] = "fixed_files",
};

#define HAS(t, f) (((t)->feats & (1u << (f))) != 0)
#define WANT(f) ((U.disabled & (1u << (f))) == 0)

/* A connection's echo on the multishot path (owned by its thread). */
struct uconn {
    char *out; /* being sent (whole messages): the kernel reads it while a send is in flight */
    uint32_t out_cap, out_len, out_sent;
    char *pend; /* whole messages not yet in a send, from pend_head on */
    uint32_t pend_cap, pend_len, pend_head;
    bool recv_armed;
    bool send_busy; /* a send, or its wait for writability, is in flight */
    bool closing, fixed;
    bool paused; /* the backlog is full: not received from until it is down to half */
};

struct uthr {
    struct io_uring ring;
    bool ring_ok;
    unsigned feats;                 /* 1 << enum ufeat */
    struct io_uring_buf_ring *br;   /* provided buffers: the ring the kernel takes them from */
    size_t br_bytes;
    char *bufs;
    int recycled;                   /* buffers handed back since the last advance */
    bool replies;                   /* sends prepared since the last submit */
    uint64_t exhausted;             /* receives that found no buffer */
    int efd;        /* kicked when the inbox has connections, or at shutdown */
    uint64_t efd_v; /* the in-flight eventfd read's buffer */
    pthread_mutex_t inbox_lock;
    int *inbox;
    int inbox_n, inbox_cap;
    int *batch; /* the owner's copy of the inbox */
};

struct uring_d {
    struct server *s;
    unsigned disabled; /* 1 << enum ufeat: DEMUX_URING_DISABLE, to test the fallbacks */
    struct uthr *t;
    int n;
    int next; /* round-robin cursor, thread 0 only */
    struct uconn *uc; /* by descriptor */
    unsigned nbufs;
    int fixed_slots;
    uint32_t backlog_max;           /* a connection's unsent bytes before it is paused */
    bool before_work;               /* with work: replies submitted before the next message's work */
    struct __kernel_timespec stall; /* --stall-ms, for the waits for writability */
};

static struct uring_d U;

static void prep_accept(struct server *s, struct uthr *t)
{
    uring_prep_accept(uring_sqe(&t->ring), s->ct.lfd);
}

static void prep_inbox(struct uthr *t)
{
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_read(sqe, t->efd, &t->efd_v, sizeof(t->efd_v), 0);
    io_uring_sqe_set_data64(sqe, uring_tag(0, U_INBOX));
}

/* ---- the single-shot path (no multishot receive) -------------------- */

static void prep_recv(struct server *s, struct uthr *t, struct conn *c)
{
    uring_prep_recv(uring_sqe(&t->ring), &s->ct, c);
}

/* A message's work; with work the replies prepared before it go to the kernel
 * first (uring_conn.h), else they would wait behind it for the next wait. */
static void work(struct server *s, struct uthr *t)
{
    if (t->replies && U.before_work) {
        ur_submit(&t->ring);
        t->replies = false;
    }
    conn_work(&s->ct);
}

static void prep_send(struct server *s, struct uthr *t, struct conn *c)
{
    uring_prep_send(uring_sqe(&t->ring), &s->ct, c);
    t->replies = true;
}

static void on_recv_single(struct server *s, struct uthr *t, struct conn *c, int res)
{
    switch (uring_recv_done(&s->ct, c, res)) {
    case US_RECV:
        prep_recv(s, t, c);
        break;
    case US_MESSAGE:
        work(s, t);
        prep_send(s, t, c);
        break;
    case US_SEND:
    case US_WAIT:
    case US_CLOSED:
        break;
    }
}

static void on_send_single(struct server *s, struct uthr *t, struct conn *c, int res)
{
    switch (uring_send_done(&s->ct, c, res)) {
    case US_SEND:
        prep_send(s, t, c);
        break;
    case US_WAIT:
        uring_prep_wait_writable(&t->ring, c->fd, false, &U.stall);
        break;
    case US_RECV:
        prep_recv(s, t, c);
        break;
    case US_MESSAGE:
    case US_CLOSED:
        break;
    }
}

static void on_writable_single(struct server *s, struct uthr *t, struct conn *c, int res)
{
    if (uring_writable_done(&s->ct, c, res) == US_SEND)
        prep_send(s, t, c);
}

/* ---- the multishot path --------------------------------------------- */

static void arm_recv(struct uthr *t, struct conn *c, struct uconn *u)
{
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT | (u->fixed ? IOSQE_FIXED_FILE : 0);
    sqe->buf_group = PBUF_GROUP;
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_RECV));
    u->recv_armed = true;
}

/* Echo bytes not yet taken by the kernel: the send's rest and the messages
 * queued behind it. */
static uint32_t backlog(const struct uconn *u)
{
    return (u->out_len - u->out_sent) + (u->pend_len - u->pend_head);
}

/* The backlog is full: no more is received until it is down to half.  An armed
 * receive is cancelled (what it completes before the cancel lands is still
 * taken); one that has ended is not armed again.  The cancel is found by the
 * receive's tag, and entries go to the kernel in order, so it can only meet
 * this connection's receive. */
static void pause_recv(struct uthr *t, struct conn *c, struct uconn *u)
{
    u->paused = true;
    if (!u->recv_armed)
        return;
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_cancel64(sqe, uring_tag(c->fd, U_RECV), 0);
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_CANCEL));
}

static void resume_recv(struct uthr *t, struct conn *c, struct uconn *u)
{
    if (!u->paused || backlog(u) > U.backlog_max / 2)
        return;
    u->paused = false;
    if (!u->recv_armed && !u->closing) /* else its end (the cancel's) arms it again */
        arm_recv(t, c, u);
}

static void grow(char **buf, uint32_t *cap, uint32_t need)
{
    if (need <= *cap)
        return;
    uint32_t n = *cap ? *cap : 64;
    while (n < need)
        n = n > UINT32_MAX / 2 ? need : 2 * n;
    char *p = realloc(*buf, n);
    if (p == NULL)
        die("out of memory for a connection's echo (%u bytes)", n);
    *buf = p;
    *cap = n;
}

/* Whole messages, queued for the echo. */
static void append(struct uconn *u, const char *p, uint32_t len)
{
    if (u->pend_head > 0 && u->pend_len + len > u->pend_cap) {
        memmove(u->pend, u->pend + u->pend_head, u->pend_len - u->pend_head);
        u->pend_len -= u->pend_head;
        u->pend_head = 0;
    }
    grow(&u->pend, &u->pend_cap, u->pend_len + len);
    memcpy(u->pend + u->pend_len, p, len);
    u->pend_len += len;
}

/* With no send in flight, the next one: the rest of the last, or what is
 * queued -- without work all of it (the buffers trade places), with work the
 * next message, worked on now (its send goes to the kernel before any other
 * message's work, work()). */
static void flush(struct server *s, struct uthr *t, struct conn *c, struct uconn *u)
{
    if (u->send_busy)
        return;
    if (u->out_sent == u->out_len) {
        uint32_t queued = u->pend_len - u->pend_head;
        if (queued == 0)
            return;
        if (!U.before_work) {
            if (u->pend_head > 0) /* never without work, which takes all: kept for the swap */
                memmove(u->pend, u->pend + u->pend_head, queued);
            char *o = u->out;
            uint32_t cap = u->out_cap;
            u->out = u->pend;
            u->out_cap = u->pend_cap;
            u->out_len = queued;
            u->pend = o;
            u->pend_cap = cap;
            u->pend_len = u->pend_head = 0;
        } else {
            const uint32_t b = s->cfg.msg_size;
            grow(&u->out, &u->out_cap, b);
            memcpy(u->out, u->pend + u->pend_head, b);
            u->out_len = b;
            u->pend_head += b;
            if (u->pend_head == u->pend_len)
                u->pend_head = u->pend_len = 0;
            work(s, t);
        }
        u->out_sent = 0;
    }
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_send(sqe, c->fd, u->out + u->out_sent, u->out_len - u->out_sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (u->fixed)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_SEND));
    u->send_busy = true;
    t->replies = true;
}

/* Arrived bytes: whole messages are queued for the echo; a partial one waits
 * in the connection's buffer. */
static void consume(struct server *s, struct conn *c, struct uconn *u, const char *p, uint32_t n)
{
    const uint32_t b = s->cfg.msg_size;
    while (n > 0) {
        if (c->have == 0 && n >= b) {
            uint32_t k = n / b;
            append(u, p, k * b);
            p += k * b;
            n -= k * b;
            continue;
        }
        uint32_t take = n < b - c->have ? n : b - c->have;
        memcpy(c->buf + c->have, p, take);
        c->have += take;
        p += take;
        n -= take;
        if (c->have == b) {
            append(u, c->buf, b);
            c->have = 0;
        }
    }
}

static void recycle(struct uthr *t, unsigned bid)
{
    io_uring_buf_ring_add(t->br, t->bufs + (size_t)bid * PBUF_SIZE, PBUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(U.nbufs), t->recycled++);
}

/* Neither the receive nor a send is in flight: the descriptor is ours to
 * close (a late completion can never meet its reused number). */
static void finish(struct server *s, struct uthr *t, struct conn *c, struct uconn *u)
{
    if (u->fixed) {
        int none = -1;
        SYSC(io_uring_register_files_update(&t->ring, (unsigned)c->fd, &none, 1));
        u->fixed = false;
    }
    u->out_len = u->out_sent = u->pend_len = u->pend_head = 0;
    u->closing = u->paused = false;
    conn_close(&s->ct, c);
}

/* The peer is gone or will not read: the echo is dropped; a receive still
 * armed is ended by shutting the socket down, and the close follows its end. */
static void drop(struct conn *c, struct uconn *u)
{
    u->out_len = u->out_sent = u->pend_len = u->pend_head = 0;
    u->closing = true;
    if (u->recv_armed)
        SYSC(shutdown(c->fd, SHUT_RDWR));
}

static void on_recv_multi(struct server *s, struct uthr *t, struct conn *c, int res, unsigned flags)
{
    struct uconn *u = &U.uc[c->fd];
    bool more = (flags & IORING_CQE_F_MORE) != 0;
    if (!more)
        u->recv_armed = false;
    if (res > 0) {
        unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
        consume(s, c, u, t->bufs + (size_t)bid * PBUF_SIZE, (uint32_t)res);
        recycle(t, bid);
        if (!u->paused && !u->closing && backlog(u) >= U.backlog_max)
            pause_recv(t, c, u);
        if (!more && !u->closing && !u->paused)
            arm_recv(t, c, u);
        flush(s, t, c, u);
        if (u->closing && !u->recv_armed && !u->send_busy)
            finish(s, t, c, u);
        return;
    }
    if (more) /* a failure that leaves it armed: nothing to do */
        return;
    /* Ended without end of stream: out of buffers, interrupted, or cancelled
     * by pause_recv(); armed again unless the connection is (still) paused. */
    if (!u->closing && (res == -ENOBUFS || res == -EINTR || res == -EAGAIN || res == -ECANCELED)) {
        if (res == -ENOBUFS)
            t->exhausted++;
        if (!u->paused)
            arm_recv(t, c, u);
        return;
    }
    /* End of stream or an error: what is queued still goes out, then close. */
    u->closing = true;
    if (!u->send_busy)
        finish(s, t, c, u);
}

/* A send took n more bytes of out, which holds whole messages from its start:
 * each whose last byte it took counts now. */
static void sent_multi(const struct server *s, struct uconn *u, uint32_t n)
{
    const uint32_t b = s->cfg.msg_size;
    uint32_t done = u->out_sent / b;
    u->out_sent += n;
    for (uint32_t k = u->out_sent / b - done; k > 0; k--)
        count_message();
}

static void on_send_multi(struct server *s, struct uthr *t, struct conn *c, int res)
{
    struct uconn *u = &U.uc[c->fd];
    u->send_busy = false;
    if (res > 0) {
        sent_multi(s, u, (uint32_t)res);
        if (u->out_sent == u->out_len)
            u->out_len = u->out_sent = 0;
        resume_recv(t, c, u);
    } else if (res == -EAGAIN) { /* the socket is full: wait until it takes more, or --stall-ms */
        uring_prep_wait_writable(&t->ring, c->fd, u->fixed, &U.stall);
        u->send_busy = true;
        return;
    } else if (res != -EINTR) {
        drop(c, u);
        if (u->recv_armed)
            return;
    }
    flush(s, t, c, u);
    if (!u->send_busy && u->closing && !u->recv_armed)
        finish(s, t, c, u);
}

static void on_writable_multi(struct server *s, struct uthr *t, struct conn *c, int res)
{
    struct uconn *u = &U.uc[c->fd];
    u->send_busy = false;
    if (uring_writable(res) == UW_STALLED) {
        count_stalled();
        drop(c, u);
        if (u->recv_armed)
            return;
    }
    flush(s, t, c, u);
    if (!u->send_busy && u->closing && !u->recv_armed)
        finish(s, t, c, u);
}

/* A connection this thread now owns: its receive goes in. */
static void start(struct server *s, struct uthr *t, struct conn *c)
{
    if (!HAS(t, UF_RECV_MULTISHOT)) {
        prep_recv(s, t, c);
        return;
    }
    struct uconn *u = &U.uc[c->fd];
    u->out_len = u->out_sent = u->pend_len = u->pend_head = 0;
    u->send_busy = u->closing = u->paused = false;
    u->fixed = HAS(t, UF_FIXED_FILES) && c->fd < U.fixed_slots &&
               SYSC(io_uring_register_files_update(&t->ring, (unsigned)c->fd, &c->fd, 1)) == 1;
    arm_recv(t, c, u);
}

/* ---- accept and hand-out -------------------------------------------- */

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
        start(s, me, c);
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
        start(s, t, conn_at(&s->ct, t->batch[i]));
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
        uring_prep_listen_poll(uring_sqe(&t->ring), s->ct.lfd);
    else
        prep_accept(s, t);
}

/* ---- the ring and its features -------------------------------------- */

static int setup_buffers(struct uthr *t)
{
    t->br_bytes = (size_t)U.nbufs * sizeof(struct io_uring_buf);
    void *br = mmap(NULL, t->br_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (br == MAP_FAILED)
        return -1;
    t->br = br;
    t->bufs = malloc((size_t)U.nbufs * PBUF_SIZE);
    struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)br, .ring_entries = U.nbufs,
                                   .bgid = PBUF_GROUP};
    if (t->bufs == NULL || SYSC(io_uring_register_buf_ring(&t->ring, &reg, 0)) < 0) {
        munmap(br, t->br_bytes);
        free(t->bufs);
        t->br = NULL;
        t->bufs = NULL;
        return -1;
    }
    io_uring_buf_ring_init(t->br);
    for (unsigned i = 0; i < U.nbufs; i++)
        recycle(t, i);
    io_uring_buf_ring_advance(t->br, t->recycled);
    t->recycled = 0;
    return 0;
}

/* Multishot receive, tried: a byte in a socket pair must complete into a
 * provided buffer with the receive still armed (IORING_CQE_F_MORE). */
static bool probe_multishot(struct uthr *t)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return false;
    bool ok = false, armed = false;
    if (SYSC(write(sv[1], "x", 1)) == 1) {
        struct io_uring_sqe *sqe = uring_sqe(&t->ring);
        io_uring_prep_recv_multishot(sqe, sv[0], NULL, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = PBUF_GROUP;
        io_uring_sqe_set_data64(sqe, uring_tag(sv[0], U_PROBE));
        armed = ur_submit(&t->ring) == 1;
    }
    bool first = true;
    while (armed) {
        struct io_uring_cqe *cqe;
        if (ur_wait_cqe(&t->ring, &cqe) < 0)
            break; /* cannot happen with a receive in flight; never spin */
        int res = cqe->res;
        unsigned flags = cqe->flags;
        io_uring_cqe_seen(&t->ring, cqe);
        if (flags & IORING_CQE_F_BUFFER)
            recycle(t, flags >> IORING_CQE_BUFFER_SHIFT);
        if (first) {
            ok = res == 1 && (flags & IORING_CQE_F_MORE);
            first = false;
            if (flags & IORING_CQE_F_MORE)
                SYSC(shutdown(sv[0], SHUT_RDWR)); /* ends the receive */
        }
        armed = (flags & IORING_CQE_F_MORE) != 0;
    }
    io_uring_buf_ring_advance(t->br, t->recycled);
    t->recycled = 0;
    close(sv[0]);
    close(sv[1]);
    return ok;
}

static void ring_init(struct server *s, struct uthr *t, int index)
{
    /* Every connection of a thread can complete at once (its share, but the
     * deal is only even when no connection closes): room for all of them, and
     * for a send beside each receive. */
    unsigned cq = 2 * (unsigned)s->ct.nslots + 64 > 8192 ? 2 * (unsigned)s->ct.nslots + 64 : 8192;
    unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
    unsigned extra = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    int rc = -EINVAL;
    for (int attempt = 0; attempt < 2 && rc == -EINVAL; attempt++) {
        struct io_uring_params p = {0};
        bool with = attempt == 0 && WANT(UF_SINGLE_ISSUER) && WANT(UF_DEFER_TASKRUN);
        p.flags = base | (with ? extra : 0);
        p.cq_entries = cq;
        rc = SYSC(io_uring_queue_init_params(1024, &t->ring, &p));
        if (rc == 0 && with)
            t->feats |= 1u << UF_SINGLE_ISSUER | 1u << UF_DEFER_TASKRUN;
    }
    if (rc < 0)
        die("cannot create the io_uring of uring thread %d: %s", index, strerror(-rc));
    t->ring_ok = true;
    if (WANT(UF_REGISTERED_RING) && SYSC(io_uring_register_ring_fd(&t->ring)) == 1)
        t->feats |= 1u << UF_REGISTERED_RING;
    if (WANT(UF_BUF_RING) && setup_buffers(t) == 0) {
        t->feats |= 1u << UF_BUF_RING;
        if (WANT(UF_RECV_MULTISHOT) && probe_multishot(t))
            t->feats |= 1u << UF_RECV_MULTISHOT;
    }
    if (HAS(t, UF_RECV_MULTISHOT) && WANT(UF_FIXED_FILES) &&
        SYSC(io_uring_register_files_sparse(&t->ring, (unsigned)U.fixed_slots)) == 0)
        t->feats |= 1u << UF_FIXED_FILES;
    prep_inbox(t);
    if (index == 0)
        prep_accept(s, t);
}

/* uring_count_unreaped()'s bookkeeping: a thread's ring, so its own connections. */
static void sent_unreaped(void *arg, int fd, uint32_t n)
{
    struct uthr *t = arg;
    struct server *s = U.s;
    if (HAS(t, UF_RECV_MULTISHOT))
        sent_multi(s, &U.uc[fd], n);
    else
        uring_sent(&s->ct, conn_at(&s->ct, fd), n);
}

static void *uring_loop(void *arg)
{
    struct server *s = U.s;
    int index = (int)(intptr_t)arg;
    struct uthr *t = &U.t[index];
    ring_init(s, t, index);
    while (!stopping(s)) {
        t->replies = false; /* the wait submits them */
        int ready = uring_wait_timed(&t->ring, true);
        struct io_uring_cqe *cqe;
        for (int n = 0; n < ready && !stopping(s) && ur_peek_cqe(&t->ring, &cqe) == 0; n++) {
            uint64_t ud = io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            unsigned flags = cqe->flags;
            io_uring_cqe_seen(&t->ring, cqe);
            int fd = uring_tag_fd(ud);
            bool multi = HAS(t, UF_RECV_MULTISHOT);
            switch (uring_tag_op(ud)) {
            case U_ACCEPT:
                on_accept(s, t, res);
                break;
            case U_LISTEN:
                if (!stopping(s))
                    prep_accept(s, t);
                break;
            case U_RECV:
                if (multi)
                    on_recv_multi(s, t, conn_at(&s->ct, fd), res, flags);
                else
                    on_recv_single(s, t, conn_at(&s->ct, fd), res);
                break;
            case U_SEND:
                if (multi)
                    on_send_multi(s, t, conn_at(&s->ct, fd), res);
                else
                    on_send_single(s, t, conn_at(&s->ct, fd), res);
                break;
            case U_WRITABLE:
                if (multi)
                    on_writable_multi(s, t, conn_at(&s->ct, fd), res);
                else
                    on_writable_single(s, t, conn_at(&s->ct, fd), res);
                break;
            case U_INBOX:
                on_inbox(s, t);
                break;
            case U_STALL:  /* its poll's completion says what happened */
            case U_CANCEL: /* the receive's end says it */
            case U_WAKE:   /* the shared ring's only */
            case U_PROBE:  /* ring_init's, all consumed there */
                break;
            }
        }
        if (t->recycled > 0) { /* the buffers handed back in this batch, in one release */
            io_uring_buf_ring_advance(t->br, t->recycled);
            t->recycled = 0;
        }
    }
    uring_count_unreaped(&t->ring, sent_unreaped, t); /* only this thread submits to its ring */
    return NULL;
}

static int uring_start(struct server *s)
{
    U.s = s;
    U.n = s->cfg.threads;
    U.nbufs = PBUF_COUNT;
    const char *env = getenv("DEMUX_URING_BUFS"); /* tests: force the buffer ring to run dry */
    uint64_t v;
    if (env != NULL) {
        if (parse_u64(env, 1, 32768, &v) < 0 || (v & (v - 1)) != 0)
            usage_error("bad DEMUX_URING_BUFS '%s' (a power of two, 1..32768)", env);
        U.nbufs = (unsigned)v;
    }
    if ((env = getenv("DEMUX_URING_DISABLE")) != NULL) { /* tests: force a fallback */
        char *list = strdup(env), *save = NULL;
        if (list == NULL)
            return -1;
        for (char *name = strtok_r(list, ",", &save); name != NULL; name = strtok_r(NULL, ",", &save)) {
            int f = 0;
            while (f < UF_COUNT && strcmp(ufeat_names[f], name) != 0)
                f++;
            if (f == UF_COUNT)
                usage_error("bad DEMUX_URING_DISABLE '%s' (a comma list of uring features)", env);
            U.disabled |= 1u << f;
        }
        free(list);
    }
    U.fixed_slots = s->ct.nslots < FIXED_SLOTS_MAX ? s->ct.nslots : FIXED_SLOTS_MAX;
    uint64_t bl = (uint64_t)BACKLOG_MSGS * s->cfg.msg_size;
    U.backlog_max = bl > BACKLOG_MIN ? (uint32_t)bl : BACKLOG_MIN;
    U.before_work = uring_replies_before_work(&s->cfg);
    U.stall = uring_stall_timeout(&s->cfg);
    U.t = calloc((size_t)U.n, sizeof(*U.t));
    U.uc = calloc((size_t)s->ct.nslots, sizeof(*U.uc));
    if (U.t == NULL || U.uc == NULL)
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

/* The exit JSON's `uring` member: what thread 0's ring got (every thread
 * probes the same kernel), and the buffer ring's use over all threads. */
static void uring_describe(struct server *s, FILE *out)
{
    (void)s;
    const struct uthr *t0 = &U.t[0];
    uint64_t exhausted = 0;
    for (int i = 0; i < U.n; i++)
        exhausted += U.t[i].exhausted;
    fprintf(out, ", \"uring\": {\"features\": [");
    for (int f = 0, first = 1; f < UF_COUNT; f++)
        if (HAS(t0, f)) {
            fprintf(out, "%s\"%s\"", first ? "" : ", ", ufeat_names[f]);
            first = 0;
        }
    fprintf(out, "], \"unavailable\": [");
    for (int f = 0, first = 1; f < UF_COUNT; f++)
        if (!HAS(t0, f)) {
            fprintf(out, "%s\"%s\"", first ? "" : ", ", ufeat_names[f]);
            first = 0;
        }
    fprintf(out, "], \"provided_buffers\": %u, \"buffer_size\": %u, \"buffers_exhausted\": %" PRIu64 "}",
           HAS(t0, UF_BUF_RING) ? U.nbufs : 0, PBUF_SIZE, exhausted);
}

static void uring_cleanup(struct server *s)
{
    (void)s;
    for (int i = 0; i < U.n; i++) {
        struct uthr *t = &U.t[i];
        if (t->ring_ok)
            io_uring_queue_exit(&t->ring);
        if (t->br != NULL)
            munmap(t->br, t->br_bytes);
        free(t->bufs);
        close(t->efd);
        pthread_mutex_destroy(&t->inbox_lock);
        free(t->inbox);
        free(t->batch);
    }
    for (int fd = 0; fd < s->ct.nslots; fd++) {
        free(U.uc[fd].out);
        free(U.uc[fd].pend);
    }
    free(U.uc);
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
    .describe = uring_describe,
};
