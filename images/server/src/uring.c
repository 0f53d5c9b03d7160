/* uring.c -- a true asynchronous Proactor on io_uring, distributed (seed 002's
 * lesson: distribute the demultiplexing and the event sources): T threads, each
 * with its OWN ring and its own share of the connections.  A thread submits
 * recv and send for its connections to its ring, waits for their completions,
 * and does the work inline, so no ring, lock or queue is shared on the hot path.
 * Thread 0 also owns the listener (an accept kept in flight on its ring) and
 * deals new connections out round-robin: a connection for another thread goes
 * into that thread's inbox (a mutex-protected array) and an eventfd write wakes
 * it (each ring keeps a read of its eventfd in flight).  A connection never
 * changes thread.  A message counts once its echo is queued for sending.  The
 * single-ring design (one completion thread + T-1 handlers) is pattern
 * `uring-shared`.
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
 *  - sends are prepared while a completion batch is processed and go to the
 *    kernel with the next wait, one io_uring_enter per batch.
 * With multishot receive a connection may have its receive and one send in
 * flight; echoes that arrive while a send is in flight wait in a second buffer
 * and go out when it completes, in order.  It is closed once neither is in
 * flight: the receive ends (end of stream, an error), or a failed send shuts
 * the socket down so that the receive ends.  A receive that finds no free
 * buffer ends with ENOBUFS and is armed again (`buffers_exhausted`). */
#include "server.h"
#include "uring_conn.h"

#include <inttypes.h>
#include <poll.h>
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
    char *out; /* being sent: the kernel reads it while a send is in flight */
    uint32_t out_cap, out_len, out_sent;
    char *pend; /* echoes that came while a send was in flight */
    uint32_t pend_cap, pend_len;
    bool recv_armed, send_busy, closing, fixed;
};

struct uthr {
    struct io_uring ring;
    bool ring_ok;
    unsigned feats;                 /* 1 << enum ufeat */
    struct io_uring_buf_ring *br;   /* provided buffers: the ring the kernel takes them from */
    size_t br_bytes;
    char *bufs;
    int recycled;                   /* buffers handed back since the last advance */
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

/* ---- the single-shot path (no multishot receive) -------------------- */

static void prep_recv(struct server *s, struct uthr *t, struct conn *c)
{
    uring_prep_recv(uring_sqe(&t->ring), &s->ct, c);
}

static void prep_send(struct server *s, struct uthr *t, struct conn *c)
{
    uring_prep_send(uring_sqe(&t->ring), &s->ct, c);
}

static void on_recv_single(struct server *s, struct uthr *t, struct conn *c, int res)
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

static void on_send_single(struct server *s, struct uthr *t, struct conn *c, int res)
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

static void flush(struct uthr *t, struct conn *c, struct uconn *u)
{
    if (u->send_busy || u->out_sent == u->out_len)
        return;
    struct io_uring_sqe *sqe = uring_sqe(&t->ring);
    io_uring_prep_send(sqe, c->fd, u->out + u->out_sent, u->out_len - u->out_sent, MSG_NOSIGNAL);
    if (u->fixed)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_SEND));
    u->send_busy = true;
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

/* Echoes of whole messages: into the buffer being filled for the next send. */
static void append(struct uconn *u, const char *p, uint32_t len)
{
    if (!u->send_busy) {
        grow(&u->out, &u->out_cap, u->out_len + len);
        memcpy(u->out + u->out_len, p, len);
        u->out_len += len;
    } else {
        grow(&u->pend, &u->pend_cap, u->pend_len + len);
        memcpy(u->pend + u->pend_len, p, len);
        u->pend_len += len;
    }
}

/* Arrived bytes: whole messages are worked on, counted and queued for the
 * echo; a partial one waits in the connection's buffer. */
static void consume(struct server *s, struct conn *c, struct uconn *u, const char *p, uint32_t n)
{
    const uint32_t b = s->cfg.msg_size;
    while (n > 0) {
        if (c->have == 0 && n >= b) {
            uint32_t k = n / b;
            for (uint32_t i = 0; i < k; i++) {
                conn_work(&s->ct);
                count_message();
            }
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
            conn_work(&s->ct);
            count_message();
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
        io_uring_register_files_update(&t->ring, (unsigned)c->fd, &none, 1);
        u->fixed = false;
    }
    u->out_len = u->out_sent = u->pend_len = 0;
    u->closing = false;
    conn_close(&s->ct, c);
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
        if (!more && !u->closing)
            arm_recv(t, c, u);
        flush(t, c, u);
        if (u->closing && !u->recv_armed && !u->send_busy)
            finish(s, t, c, u);
        return;
    }
    if (more) /* a failure that leaves it armed: nothing to do */
        return;
    if (!u->closing && (res == -ENOBUFS || res == -EINTR || res == -EAGAIN)) {
        if (res == -ENOBUFS)
            t->exhausted++;
        arm_recv(t, c, u);
        return;
    }
    /* End of stream or an error: what is queued still goes out, then close. */
    u->closing = true;
    if (!u->send_busy)
        finish(s, t, c, u);
}

static void on_send_multi(struct server *s, struct uthr *t, struct conn *c, int res)
{
    struct uconn *u = &U.uc[c->fd];
    u->send_busy = false;
    if (res > 0) {
        u->out_sent += (uint32_t)res;
        if (u->out_sent == u->out_len) {
            char *o = u->out;
            uint32_t cap = u->out_cap;
            u->out = u->pend;
            u->out_cap = u->pend_cap;
            u->out_len = u->pend_len;
            u->out_sent = 0;
            u->pend = o;
            u->pend_cap = cap;
            u->pend_len = 0;
        }
    } else if (res != -EINTR && res != -EAGAIN) {
        /* The peer is gone: drop the echo; a receive still armed is ended
         * by shutting the socket down, and the close follows its end. */
        u->out_len = u->out_sent = u->pend_len = 0;
        u->closing = true;
        if (u->recv_armed) {
            shutdown(c->fd, SHUT_RDWR);
            return;
        }
    }
    flush(t, c, u);
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
    u->out_len = u->out_sent = u->pend_len = 0;
    u->send_busy = u->closing = false;
    u->fixed = HAS(t, UF_FIXED_FILES) && c->fd < U.fixed_slots &&
               io_uring_register_files_update(&t->ring, (unsigned)c->fd, &c->fd, 1) == 1;
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
        prep_listen_poll(s, t);
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
    if (t->bufs == NULL || io_uring_register_buf_ring(&t->ring, &reg, 0) < 0) {
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
    if (write(sv[1], "x", 1) == 1) {
        struct io_uring_sqe *sqe = uring_sqe(&t->ring);
        io_uring_prep_recv_multishot(sqe, sv[0], NULL, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = PBUF_GROUP;
        io_uring_sqe_set_data64(sqe, uring_tag(sv[0], U_PROBE));
        armed = io_uring_submit(&t->ring) == 1;
    }
    bool first = true;
    while (armed) {
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&t->ring, &cqe) < 0)
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
                shutdown(sv[0], SHUT_RDWR); /* ends the receive */
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
        rc = io_uring_queue_init_params(1024, &t->ring, &p);
        if (rc == 0 && with)
            t->feats |= 1u << UF_SINGLE_ISSUER | 1u << UF_DEFER_TASKRUN;
    }
    if (rc < 0)
        die("cannot create the io_uring of uring thread %d: %s", index, strerror(-rc));
    t->ring_ok = true;
    if (WANT(UF_REGISTERED_RING) && io_uring_register_ring_fd(&t->ring) == 1)
        t->feats |= 1u << UF_REGISTERED_RING;
    if (WANT(UF_BUF_RING) && setup_buffers(t) == 0) {
        t->feats |= 1u << UF_BUF_RING;
        if (WANT(UF_RECV_MULTISHOT) && probe_multishot(t))
            t->feats |= 1u << UF_RECV_MULTISHOT;
    }
    if (HAS(t, UF_RECV_MULTISHOT) && WANT(UF_FIXED_FILES) &&
        io_uring_register_files_sparse(&t->ring, (unsigned)U.fixed_slots) == 0)
        t->feats |= 1u << UF_FIXED_FILES;
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
            case U_INBOX:
                on_inbox(s, t);
                break;
            case U_WAKE:  /* the shared ring's only */
            case U_PROBE: /* ring_init's, all consumed there */
                break;
            }
        }
        if (t->recycled > 0) { /* the buffers handed back in this batch, in one release */
            io_uring_buf_ring_advance(t->br, t->recycled);
            t->recycled = 0;
        }
    }
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
