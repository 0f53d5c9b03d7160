/* conn.c -- the protocol every pattern shares: accept, read a whole B-byte
 * message, spin W us, echo it back; the wait for writability of an echo the
 * socket will not take (parking and the stall sweep); plus the claim protocol
 * that keeps one owner per connection under edge-triggered notification. */
#include "conn.h"

#include "instr.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct conn *conn_open(struct conn_table *t, int fd)
{
    if (fd >= t->nslots || atomic_load(&t->open) >= t->max_conns) {
        SYSC(close(fd));
        return NULL;
    }
    struct conn *c = conn_at(t, fd);
    conn_takeover(c); /* from the thread that closed the slot's last descriptor */
    if (c->buf == NULL) {
        c->buf = malloc(t->cfg->msg_size);
        if (c->buf == NULL) {
            SYSC(close(fd));
            return NULL;
        }
    }
    int one = 1;
    SYSC(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
    /* Edge-triggered: every read reports what is left in the socket, so a
     * drain knows it is done without a read that returns EAGAIN (issue 24). */
    if (t->cfg->nops != NULL && t->cfg->nops->edge)
        SYSC(setsockopt(fd, IPPROTO_TCP, TCP_INQ, &one, sizeof(one)));
    /* tpc's blocking sends give up after --stall-ms without progress: the stall rule of every pattern. */
    if (t->cfg->nops == NULL) {
        struct timeval tv = {.tv_sec = t->cfg->stall_ms / 1000, .tv_usec = (t->cfg->stall_ms % 1000) * 1000};
        SYSC(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
    }
    c->fd = fd;
    c->drained = false;
    c->have = 0;
    c->sent = 0;
    c->wblocked = false;
    c->stall_at = 0;
    c->nt = NULL;
    atomic_fetch_add(&t->open, 1);
    count_accepted();
    atomic_store_explicit(&c->live, true, memory_order_release);
    conn_handoff(c);
    return c;
}

void conn_close(struct conn_table *t, struct conn *c)
{
    /* The thread whose arming call passed the connection to us may still be
     * returning from it: the descriptor is ours to close only once it has. */
    while (conn_arming_in_flight(c))
        SYSC(sched_yield());
    if (c->nt != NULL)
        c->nt->ops->del(c->nt, c->fd);
    int fd = c->fd;
    atomic_store_explicit(&c->live, false, memory_order_release);
    conn_handoff(c);
    SYSC(close(fd));
    atomic_fetch_sub(&t->open, 1);
    count_closed();
}

enum rd conn_read(struct conn_table *t, struct conn *c)
{
    enum rd res;
    uint64_t t0 = instr_start();
    /* tpc's blocking reads, timed: one that finds nothing waits in poll(), booked as `idle` as every other
     * pattern books its wait for work, and the read itself stays `recv`. */
    int flags = t->cfg->nops == NULL && instr_on() ? MSG_DONTWAIT : 0;
    for (;;) {
        /* Never past the message: extra bytes stay queued in the socket and
         * are the next message. */
        ssize_t r = SYSC(recv(c->fd, c->buf + c->have, t->cfg->msg_size - c->have, flags));
        if (r > 0) {
            c->have += (uint32_t)r;
            if (c->have == t->cfg->msg_size) {
                res = RD_MSG;
                break;
            }
            continue;
        }
        if (r == 0) {
            res = RD_CLOSED;
            break;
        }
        if (errno == EINTR && !conns_stopping(t))
            continue;
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && flags != 0) {
            uint64_t w0 = now_ns();
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            while (SYSC(poll(&p, 1, -1)) < 0 && errno == EINTR && !conns_stopping(t)) {
            }
            uint64_t waited = now_ns() - w0;
            instr_add(OP_IDLE, waited);
            t0 += waited;
            continue;
        }
        res = (errno == EAGAIN || errno == EWOULDBLOCK) ? RD_AGAIN : RD_CLOSED;
        break;
    }
    instr_end(OP_RECV, t0);
    return res;
}

/* One recvmsg, with what TCP_INQ says is left in the socket in *inq
 * (-1: no report). */
static ssize_t recv_inq(int fd, char *buf, size_t len, int *inq)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
    ssize_t r = SYSC(recvmsg(fd, &msg, 0));
    *inq = -1;
    if (r > 0)
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm))
            if (cm->cmsg_level == SOL_TCP && cm->cmsg_type == TCP_CM_INQ)
                memcpy(inq, CMSG_DATA(cm), sizeof(*inq));
    return r;
}

enum rd conn_read_edge(struct conn_table *t, struct conn *c)
{
    enum rd res;
    uint64_t t0 = instr_start();
    c->drained = false;
    for (;;) {
        int inq;
        ssize_t r = recv_inq(c->fd, c->buf + c->have, t->cfg->msg_size - c->have, &inq);
        if (r > 0) {
            c->have += (uint32_t)r;
            /* After a FIN the kernel reports 1 here, so the EOF is still read. */
            bool empty = inq == 0;
            if (c->have == t->cfg->msg_size) {
                c->drained = empty;
                res = RD_MSG;
                break;
            }
            if (empty) {
                c->drained = true;
                res = RD_AGAIN;
                break;
            }
            continue;
        }
        if (r == 0) {
            res = RD_CLOSED;
            break;
        }
        if (errno == EINTR && !conns_stopping(t))
            continue;
        res = (errno == EAGAIN || errno == EWOULDBLOCK) ? RD_AGAIN : RD_CLOSED;
        break;
    }
    instr_end(OP_RECV, t0);
    return res;
}

void conn_work(const struct conn_table *t)
{
    if (t->cfg->work_us > 0) {
        uint64_t t0 = instr_start();
        uint64_t on = spin_cpu_us(t->cfg->work_us);
        instr_end(OP_WORK, t0);
        instr_add(OP_WORK_CPU, on);
    }
}

/* A connection dropped because it would not take its reply: counted, and reset rather than closed in
 * order (its peer reads nothing, so a FIN would wait behind the unsent echo for good). */
static void mark_stalled(struct conn *c)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    SYSC(setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)));
    count_stalled();
}

enum wr conn_send(struct conn_table *t, struct conn *c)
{
    uint64_t t0 = instr_start();
    uint32_t size = t->cfg->msg_size;
    bool progress = false;
    enum wr res = WR_DONE;
    while (c->sent < size) {
        ssize_t w = SYSC(send(c->fd, c->buf + c->sent, size - c->sent, MSG_NOSIGNAL));
        if (w > 0) {
            c->sent += (uint32_t)w;
            progress = true;
            continue;
        }
        if (w < 0 && errno == EINTR && !conns_stopping(t))
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (t->cfg->nops == NULL) {
                /* tpc: a blocking send that took nothing for SO_SNDTIMEO (--stall-ms). */
                mark_stalled(c);
                res = WR_FAILED;
                break;
            }
            /* Unwritable from now on: the stall limit runs from the last byte the socket took. */
            if (progress || !c->wblocked)
                c->stall_at = now_ns() + (uint64_t)t->cfg->stall_ms * UINT64_C(1000000);
            c->wblocked = true;
            res = WR_BLOCKED;
            break;
        }
        res = WR_FAILED;
        break;
    }
    instr_end(OP_SEND, t0);
    if (res == WR_DONE) {
        c->have = 0;
        c->sent = 0;
        c->wblocked = false;
        count_message();
    }
    return res;
}

enum wr conn_respond(struct conn_table *t, struct conn *c)
{
    conn_work(t);
    return conn_send(t, c);
}

static void unlist_locked(struct conn_table *t, struct conn *c)
{
    if (!c->parked)
        return;
    if (c->park_prev != NULL)
        c->park_prev->park_next = c->park_next;
    else
        t->parked = c->park_next;
    if (c->park_next != NULL)
        c->park_next->park_prev = c->park_prev;
    c->park_prev = c->park_next = NULL;
    c->parked = false;
}

void conn_stall_watch(struct conn_table *t, struct conn *c)
{
    pthread_mutex_lock(&t->park_lock);
    if (!c->parked) {
        c->park_prev = NULL;
        c->park_next = t->parked;
        if (t->parked != NULL)
            t->parked->park_prev = c;
        t->parked = c;
        c->parked = true;
    }
    pthread_mutex_unlock(&t->park_lock);
}

bool conn_stall_unwatch(struct conn_table *t, struct conn *c)
{
    pthread_mutex_lock(&t->park_lock);
    unlist_locked(t, c);
    bool swept = c->swept;
    c->swept = false;
    pthread_mutex_unlock(&t->park_lock);
    return swept;
}

enum wr conn_resume(struct conn_table *t, struct conn *c)
{
    if (conn_stall_unwatch(t, c)) {
        mark_stalled(c);
        return WR_FAILED;
    }
    return conn_send(t, c);
}

uint64_t conns_sweep(struct conn_table *t)
{
    uint64_t now = now_ns();
    uint64_t next = (uint64_t)t->cfg->stall_ms * UINT64_C(1000000);
    pthread_mutex_lock(&t->park_lock);
    for (struct conn *c = t->parked; c != NULL; c = c->park_next) {
        if (c->swept)
            continue;
        if (c->stall_at <= now) {
            /* Listed, so not closed: the descriptor is still this connection's.  Shut down, the
             * socket reports (writable, hung up) through the interest armed on it. */
            c->swept = true;
            SYSC(shutdown(c->fd, SHUT_RDWR));
        } else if (c->stall_at - now < next) {
            next = c->stall_at - now;
        }
    }
    pthread_mutex_unlock(&t->park_lock);
    return next;
}

/* The notifier call `op` (add, re-arm or write arm) hands the connection over
 * while it runs: bracketed, see conn_arming(). */
static int arm_call(struct conn *c, struct notifier *nt, int (*op)(struct notifier *, int))
{
    int fd = c->fd;
    conn_arming(c); /* odd: publishes everything before the call */
    int rc = op(nt, fd);
    conn_arming(c); /* even: the closer's acquire orders the call before its close */
    return rc;
}

/* A re-activation (rearm or arm_write), timed as `rearm`; -1: not armed, the connection is closed. */
static int rearm_timed(struct conn_table *t, struct notifier *nt, struct conn *c,
                       int (*op)(struct notifier *, int))
{
    uint64_t t0 = instr_start();
    uint64_t kicks0 = instr_kick_wall();
    int rc = arm_call(c, nt, op);
    instr_end_less(OP_REARM, t0, kicks0); /* its kick, if any, is `kick` */
    if (rc < 0) {
        conn_close(t, c); /* not armed: still ours */
        return -1;
    }
    return 0;
}

void conn_rearm(struct conn_table *t, struct notifier *nt, struct conn *c)
{
    (void)rearm_timed(t, nt, c, nt->ops->rearm);
}

/* A new connection's first arming; its notifier is set before it is
 * published.  On failure it was never armed and is still the caller's. */
int conn_arm(struct conn *c, struct notifier *nt)
{
    c->nt = nt;
    return arm_call(c, nt, nt->ops->add);
}

void conn_park(struct conn_table *t, struct notifier *nt, struct conn *c)
{
    /* What the last read saw is stale by the time the echo is out: read on after it. */
    c->drained = false;
    conn_stall_watch(t, c);
    uint64_t t0 = instr_start();
    uint64_t kicks0 = instr_kick_wall();
    int rc = arm_call(c, nt, nt->ops->arm_write);
    instr_end_less(OP_REARM, t0, kicks0);
    if (rc < 0) {
        /* Not armed: still ours; off the list before the close. */
        (void)conn_stall_unwatch(t, c);
        c->wblocked = false;
        conn_close(t, c);
    }
}

void conn_replied(struct conn_table *t, struct notifier *nt, struct conn *c, enum wr r)
{
    switch (r) {
    case WR_DONE:
        conn_rearm(t, nt, c);
        return;
    case WR_BLOCKED:
        conn_park(t, nt, c);
        return;
    case WR_FAILED:
        conn_close(t, c);
        return;
    }
}

void conn_drain(struct conn_table *t, struct notifier *nt, struct conn *c)
{
    for (;;) {
        enum wr r;
        bool resumed = c->wblocked;
        if (resumed) {
            r = conn_resume(t, c);
        } else {
            switch (conn_read_edge(t, c)) {
            case RD_MSG:
                break;
            case RD_AGAIN:
                return;
            case RD_CLOSED:
                conn_close(t, c);
                return;
            }
            r = conn_respond(t, c);
        }
        if (r == WR_FAILED) {
            conn_close(t, c);
            return;
        }
        if (r == WR_BLOCKED) {
            conn_park(t, nt, c);
            return;
        }
        /* A parked connection was armed for writability alone (arm_write): reading again needs its read
         * interest back, before the reads, so that no arrival goes unreported. */
        if (resumed && rearm_timed(t, nt, c, nt->ops->rearm) < 0)
            return;
        if (c->drained)
            return;
    }
}

bool conn_claim(struct conn *c)
{
    return atomic_fetch_add_explicit(&c->claims, 1, memory_order_acq_rel) == 0;
}

bool conn_release(struct conn *c, int *seen)
{
    return atomic_compare_exchange_strong_explicit(&c->claims, seen, 0, memory_order_acq_rel,
                                                   memory_order_acquire);
}

void conn_ready(struct conn_table *t, struct notifier *nt, struct conn *c, bool shared)
{
    conn_takeover(c);
    if (!nt->ops->edge) {
        enum wr r;
        if (c->wblocked) {
            r = conn_resume(t, c);
        } else {
            switch (conn_read(t, c)) {
            case RD_MSG:
                break;
            case RD_AGAIN:
                conn_rearm(t, nt, c);
                return;
            case RD_CLOSED:
                conn_close(t, c);
                return;
            }
            r = conn_respond(t, c);
        }
        conn_replied(t, nt, c, r);
        return;
    }
    if (!shared) {
        conn_drain(t, nt, c);
        return;
    }
    if (!conn_claim(c))
        return;
    /* Claims that arrive while we drain make the release fail, and we drain
     * again: their data may have come after our last EAGAIN. */
    int seen = atomic_load_explicit(&c->claims, memory_order_acquire);
    do {
        if (atomic_load_explicit(&c->live, memory_order_acquire))
            conn_drain(t, nt, c);
    } while (!conn_release(c, &seen));
}

int accept_one(struct conn_table *t)
{
    for (;;) {
        uint64_t t0 = instr_start();
        /* tpc (notifier none) serves each connection with blocking I/O. */
        int fd = SYSC(accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC | (t->cfg->nops != NULL ? SOCK_NONBLOCK : 0)));
        if (fd >= 0) {
            instr_end(OP_ACCEPT, t0);
            return fd;
        }
        if (errno == EINTR && !conns_stopping(t))
            continue;
        if (errno == ECONNABORTED || errno == EPROTO)
            continue;
        if ((errno == EMFILE || errno == ENFILE) && t->reserve_fd >= 0) {
            /* Out of descriptors: spend the reserve on taking the pending
             * connection off the backlog and dropping it, so a level-
             * triggered listener does not report it again at once. */
            SYSC(close(t->reserve_fd));
            int drop = SYSC(accept(t->lfd, NULL, NULL));
            if (drop >= 0)
                SYSC(close(drop));
            t->reserve_fd = SYSC(open("/dev/null", O_RDONLY | O_CLOEXEC));
            /* accept() checks for a free descriptor before the backlog, so
             * EMFILE also means "maybe empty": stop once nothing was dropped. */
            if (drop >= 0 && !conns_stopping(t))
                continue;
            return -1;
        }
        return -1;
    }
}

void accept_all(struct conn_table *t, int (*place)(struct conn *c, void *arg), void *arg)
{
    while (!conns_stopping(t)) {
        int fd = accept_one(t);
        if (fd < 0)
            return;
        struct conn *c = conn_open(t, fd);
        if (c != NULL && place(c, arg) < 0) {
            c->nt = NULL;
            conn_close(t, c);
        }
    }
}
