/* uring_conn.h -- what the two io_uring Proactors (uring.c: a ring per thread;
 * uring_shared.c: one shared ring) do alike: tag completions, take SQEs, prepare
 * a connection's recv and send, and decide what an accept, recv or send
 * completion leads to.  Who submits, under which lock, and who does the work
 * stays with each pattern. */
#ifndef DEMUX_URING_CONN_H
#define DEMUX_URING_CONN_H

#include "conn.h"
#include "uring_wait.h"

#include <errno.h>
#include <liburing.h>

/* What a completion was for: the low byte of its user data, the descriptor
 * above it. */
enum uop { U_ACCEPT = 1, U_LISTEN, U_RECV, U_SEND, U_INBOX, U_WAKE, U_PROBE };

static inline uint64_t uring_tag(int fd, enum uop op)
{
    return ((uint64_t)(uint32_t)fd << 8) | (uint64_t)op;
}

static inline int uring_tag_fd(uint64_t ud)
{
    return (int)(ud >> 8);
}

static inline enum uop uring_tag_op(uint64_t ud)
{
    return (enum uop)(ud & 0xff);
}

/* A free SQE, submitting what is queued while the submission queue is full.
 * The caller holds whatever guards the ring's submission side. */
static inline struct io_uring_sqe *uring_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    while (sqe == NULL) {
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
    }
    return sqe;
}

/* The rest of the connection's message, or of its echo. */
static inline void uring_prep_recv(struct io_uring_sqe *sqe, const struct conn_table *t, const struct conn *c)
{
    io_uring_prep_recv(sqe, c->fd, c->buf + c->have, t->cfg->msg_size - c->have, 0);
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_RECV));
}

static inline void uring_prep_send(struct io_uring_sqe *sqe, const struct conn_table *t, const struct conn *c)
{
    io_uring_prep_send(sqe, c->fd, c->buf + c->sent, t->cfg->msg_size - c->sent, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_SEND));
}

/* What the listener needs submitted after an accept completion. */
enum uring_listen {
    UL_ACCEPT, /* another accept */
    UL_POLL,   /* out of descriptors: a poll for readability first (an io_uring
                * accept fails with EMFILE at once, backlog or not) */
    UL_NONE,   /* a listener error: stop accepting, keep serving */
};

/* An accept completed with `res`: returns the descriptor of the new connection
 * (-1: none) and sets *next.  Out of descriptors, accept_one spends the
 * reserve descriptor on the backlog, so the re-submitted accept waits for a new
 * connection instead of failing again at once. */
static inline int uring_accepted(struct conn_table *t, int res, enum uring_listen *next)
{
    *next = UL_ACCEPT;
    if (res >= 0)
        return res;
    if (res == -EMFILE || res == -ENFILE) {
        int fd = accept_one(t);
        if (fd < 0)
            *next = UL_POLL;
        return fd;
    }
    if (res != -EINTR && res != -ECONNABORTED && res != -EAGAIN && res != -EPROTO)
        *next = UL_NONE;
    return -1;
}

/* What a connection needs after a recv or send completion. */
enum uring_step {
    US_RECV,    /* (more of) its message: submit a recv */
    US_SEND,    /* the rest of its echo: submit a send */
    US_MESSAGE, /* a whole message is in: work, then send the echo */
    US_CLOSED,  /* closed here (peer gone or an error) */
};

static inline enum uring_step uring_recv_done(struct conn_table *t, struct conn *c, int res)
{
    if (res == -EINTR || res == -EAGAIN)
        return US_RECV;
    if (res <= 0) {
        conn_close(t, c);
        return US_CLOSED;
    }
    c->have += (uint32_t)res;
    if (c->have < t->cfg->msg_size)
        return US_RECV;
    c->sent = 0;
    return US_MESSAGE;
}

static inline enum uring_step uring_send_done(struct conn_table *t, struct conn *c, int res)
{
    if (res == -EINTR || res == -EAGAIN)
        return US_SEND;
    if (res <= 0) {
        conn_close(t, c);
        return US_CLOSED;
    }
    c->sent += (uint32_t)res;
    if (c->sent < t->cfg->msg_size)
        return US_SEND;
    c->have = 0;
    return US_RECV;
}

#endif
