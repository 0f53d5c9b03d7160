/* conn.c -- the protocol every pattern shares: accept, read a whole B-byte
 * message, spin W us, echo it back; plus the claim protocol that keeps one
 * owner per connection under edge-triggered notification. */
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
#include <unistd.h>

struct conn *conn_open(struct conn_table *t, int fd)
{
    if (fd >= t->nslots || atomic_load(&t->open) >= t->max_conns) {
        close(fd);
        return NULL;
    }
    struct conn *c = conn_at(t, fd);
    conn_takeover(c); /* from the thread that closed the slot's last descriptor */
    if (c->buf == NULL) {
        c->buf = malloc(t->cfg->msg_size);
        if (c->buf == NULL) {
            close(fd);
            return NULL;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* Edge-triggered: every read reports what is left in the socket, so a
     * drain knows it is done without a read that returns EAGAIN (issue 24). */
    if (t->cfg->nops != NULL && t->cfg->nops->edge)
        setsockopt(fd, IPPROTO_TCP, TCP_INQ, &one, sizeof(one));
    c->fd = fd;
    c->drained = false;
    c->have = 0;
    c->sent = 0;
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
        sched_yield();
    if (c->nt != NULL)
        c->nt->ops->del(c->nt, c->fd);
    int fd = c->fd;
    atomic_store_explicit(&c->live, false, memory_order_release);
    conn_handoff(c);
    close(fd);
    atomic_fetch_sub(&t->open, 1);
    count_closed();
}

enum rd conn_read(struct conn_table *t, struct conn *c)
{
    enum rd res;
    uint64_t t0 = instr_start();
    for (;;) {
        /* Never past the message: extra bytes stay queued in the socket and
         * are the next message. */
        ssize_t r = recv(c->fd, c->buf + c->have, t->cfg->msg_size - c->have, 0);
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
    ssize_t r = recvmsg(fd, &msg, 0);
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

static int wait_writable(const struct conn_table *t, int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r;
    do
        r = poll(&p, 1, t->cfg->stall_ms);
    while (r < 0 && errno == EINTR && !conns_stopping(t));
    if (r == 0)
        count_stalled();
    return r > 0 ? 0 : -1;
}

void conn_work(const struct conn_table *t)
{
    if (t->cfg->work_us > 0) {
        uint64_t t0 = instr_start();
        spin_us(t->cfg->work_us);
        instr_end(OP_WORK, t0);
    }
}

int conn_respond(struct conn_table *t, struct conn *c)
{
    conn_work(t);
    uint64_t t0 = instr_start();
    uint32_t off = 0;
    int rc = 0;
    while (off < t->cfg->msg_size) {
        ssize_t w = send(c->fd, c->buf + off, t->cfg->msg_size - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (uint32_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR && !conns_stopping(t))
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_writable(t, c->fd) == 0)
            continue;
        rc = -1;
        break;
    }
    instr_end(OP_SEND, t0);
    if (rc == 0) {
        c->have = 0;
        count_message();
    }
    return rc;
}

/* The notifier call `op` (add or re-arm) hands the connection over while it
 * runs: bracketed, see conn_arming(). */
static int arm_call(struct conn *c, struct notifier *nt, int (*op)(struct notifier *, int))
{
    int fd = c->fd;
    conn_arming(c); /* odd: publishes everything before the call */
    int rc = op(nt, fd);
    conn_arming(c); /* even: the closer's acquire orders the call before its close */
    return rc;
}

void conn_rearm(struct conn_table *t, struct notifier *nt, struct conn *c)
{
    uint64_t t0 = instr_start();
    uint64_t kicks0 = instr_kick_wall();
    int rc = arm_call(c, nt, nt->ops->rearm);
    instr_end_less(OP_REARM, t0, kicks0); /* its kick, if any, is `kick` */
    if (rc < 0)
        conn_close(t, c); /* not armed: still ours */
}

/* A new connection's first arming; its notifier is set before it is
 * published.  On failure it was never armed and is still the caller's. */
int conn_arm(struct conn *c, struct notifier *nt)
{
    c->nt = nt;
    return arm_call(c, nt, nt->ops->add);
}

void conn_drain(struct conn_table *t, struct conn *c)
{
    for (;;) {
        switch (conn_read_edge(t, c)) {
        case RD_MSG:
            if (conn_respond(t, c) < 0) {
                conn_close(t, c);
                return;
            }
            if (c->drained)
                return;
            break;
        case RD_AGAIN:
            return;
        case RD_CLOSED:
            conn_close(t, c);
            return;
        }
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
        switch (conn_read(t, c)) {
        case RD_MSG:
            if (conn_respond(t, c) < 0)
                conn_close(t, c);
            else
                conn_rearm(t, nt, c);
            return;
        case RD_AGAIN:
            conn_rearm(t, nt, c);
            return;
        case RD_CLOSED:
            conn_close(t, c);
            return;
        }
        return;
    }
    if (!shared) {
        conn_drain(t, c);
        return;
    }
    if (!conn_claim(c))
        return;
    /* Claims that arrive while we drain make the release fail, and we drain
     * again: their data may have come after our last EAGAIN. */
    int seen = atomic_load_explicit(&c->claims, memory_order_acquire);
    do {
        if (atomic_load_explicit(&c->live, memory_order_acquire))
            conn_drain(t, c);
    } while (!conn_release(c, &seen));
}

int accept_one(struct conn_table *t)
{
    for (;;) {
        uint64_t t0 = instr_start();
        /* tpc (notifier none) serves each connection with blocking I/O. */
        int fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC | (t->cfg->nops != NULL ? SOCK_NONBLOCK : 0));
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
            close(t->reserve_fd);
            int drop = accept(t->lfd, NULL, NULL);
            if (drop >= 0)
                close(drop);
            t->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
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
