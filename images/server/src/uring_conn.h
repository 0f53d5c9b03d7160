/* uring_conn.h -- what the two io_uring Proactors (uring.c: a ring per thread;
 * uring_shared.c: one shared ring) do alike: tag completions, take SQEs, prepare
 * an accept, a connection's recv and send and its wait for writability, and
 * decide what an accept, recv, send or writability completion leads to.  Who
 * submits, under which lock, and who does the work stays with each pattern.
 *
 * The rules both keep (issue 48, images/README.md "Fairness rules"):
 *  - a send never waits in the kernel: it is made with MSG_DONTWAIT, and one
 *    the socket will not take completes with EAGAIN; the connection then waits
 *    for writability (a poll) linked to a timeout of --stall-ms, and a
 *    connection whose poll the timeout ends is closed and counted as stalled,
 *    as the readiness patterns' conn_respond() does;
 *  - a message counts when its echo completes: at the send completion that
 *    takes its last byte (uring_sent() here, uring.c's sent_multi() for the
 *    multishot path), and at the stop for the sends not yet reaped
 *    (uring_count_unreaped());
 *  - with work (W > 0) no finished reply waits behind another message's work:
 *    before a message's work begins, the replies prepared since the last
 *    submit go to the kernel (uring_replies_before_work()); a reply with no
 *    work after it in its batch goes with the next wait, as every reply does
 *    without work (no reply then waits behind anybody's work), so a batch
 *    costs one submit more per message worked on after a reply, no more. */
#ifndef DEMUX_URING_CONN_H
#define DEMUX_URING_CONN_H

#include "conn.h"
#include "uring_sqe.h"
#include "uring_wait.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <sys/socket.h>

/* What a completion was for: the low byte of its user data, the descriptor
 * above it. */
enum uop {
    U_ACCEPT = 1,
    U_LISTEN,
    U_RECV,
    U_SEND,
    U_INBOX,
    U_WAKE,
    U_PROBE,
    U_CANCEL,   /* uring.c: the cancel of a paused connection's multishot receive */
    U_WRITABLE, /* a connection's poll for writability after a send's EAGAIN */
    U_STALL,    /* the --stall-ms timeout linked to it (its completion carries nothing) */
};

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

/* Replies go to the kernel before the next message's work only with work: see
 * the rules above. */
static inline bool uring_replies_before_work(const struct config *cfg)
{
    return cfg->work_us > 0;
}

static inline void uring_prep_accept(struct io_uring_sqe *sqe, int lfd)
{
    io_uring_prep_accept(sqe, lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, uring_tag(lfd, U_ACCEPT));
}

/* Out of descriptors: a poll for the listener's readability (UL_POLL). */
static inline void uring_prep_listen_poll(struct io_uring_sqe *sqe, int lfd)
{
    io_uring_prep_poll_add(sqe, lfd, POLLIN);
    io_uring_sqe_set_data64(sqe, uring_tag(lfd, U_LISTEN));
}

/* The rest of the connection's message, or of its echo. */
static inline void uring_prep_recv(struct io_uring_sqe *sqe, const struct conn_table *t, const struct conn *c)
{
    io_uring_prep_recv(sqe, c->fd, c->buf + c->have, t->cfg->msg_size - c->have, 0);
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_RECV));
}

static inline void uring_prep_send(struct io_uring_sqe *sqe, const struct conn_table *t, const struct conn *c)
{
    io_uring_prep_send(sqe, c->fd, c->buf + c->sent, t->cfg->msg_size - c->sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    io_uring_sqe_set_data64(sqe, uring_tag(c->fd, U_SEND));
}

/* The --stall-ms timeout of a wait for writability; read by the kernel when
 * the wait is submitted, so it lives in the pattern's state. */
static inline struct __kernel_timespec uring_stall_timeout(const struct config *cfg)
{
    return (struct __kernel_timespec){.tv_sec = cfg->stall_ms / 1000,
                                      .tv_nsec = (long long)(cfg->stall_ms % 1000) * 1000000};
}

/* A send completed with EAGAIN: a poll for writability, linked to the stall
 * timeout (two entries taken together, so no submit splits the link). */
void uring_prep_wait_writable(struct io_uring *ring, int fd, bool fixed, const struct __kernel_timespec *stall);

/* What a wait for writability's completion means: writable (or an error the
 * next send will see), or ended by its timeout: the connection would not take
 * its reply for --stall-ms. */
enum uring_writable { UW_WRITABLE, UW_STALLED };

static inline enum uring_writable uring_writable(int res)
{
    return res == -ECANCELED ? UW_STALLED : UW_WRITABLE;
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
int uring_accepted(struct conn_table *t, int res, enum uring_listen *next);

/* What a connection needs after a recv or send completion. */
enum uring_step {
    US_RECV,    /* (more of) its message: submit a recv */
    US_SEND,    /* the rest of its echo: submit a send */
    US_WAIT,    /* its socket takes no more now: wait for writability */
    US_MESSAGE, /* a whole message is in: work, then send the echo */
    US_CLOSED,  /* closed here (peer gone or an error) */
};

enum uring_step uring_recv_done(struct conn_table *t, struct conn *c, int res);

/* A send took n more bytes of the echo: true once it has all of them, and the
 * message counts then. */
bool uring_sent(const struct conn_table *t, struct conn *c, uint32_t n);

/* A send completed: the echo's last byte counts the message. */
enum uring_step uring_send_done(struct conn_table *t, struct conn *c, int res);

/* At the stop, once nobody submits to the ring any more: a send that completed
 * before the stop but was not reaped may have delivered its echo already, so
 * what the sends among the completions left took still counts (sent(): the
 * pattern's own bookkeeping); nothing else is done with them. */
void uring_count_unreaped(struct io_uring *ring, void (*sent)(void *arg, int fd, uint32_t n), void *arg);

/* A wait for writability completed (single-shot: nothing else is in flight). */
enum uring_step uring_writable_done(struct conn_table *t, struct conn *c, int res);

#endif
