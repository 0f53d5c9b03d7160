/* uring_conn.c -- see uring_conn.h: the completions both io_uring Proactors
 * handle alike, out of line (each runs once per completion, not in a loop). */
#include "uring_conn.h"

#include "instr.h"

void uring_prep_wait_writable(struct io_uring *ring, int fd, bool fixed, const struct __kernel_timespec *stall)
{
    uring_room(ring, 2);
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    io_uring_prep_poll_add(sqe, fd, POLLOUT);
    sqe->flags |= IOSQE_IO_LINK | (fixed ? IOSQE_FIXED_FILE : 0);
    io_uring_sqe_set_data64(sqe, uring_tag(fd, U_WRITABLE));
    sqe = io_uring_get_sqe(ring);
    io_uring_prep_link_timeout(sqe, (struct __kernel_timespec *)stall, 0);
    io_uring_sqe_set_data64(sqe, uring_tag(fd, U_STALL));
}

int uring_accepted(struct conn_table *t, int res, enum uring_listen *next)
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

enum uring_step uring_recv_done(struct conn_table *t, struct conn *c, int res)
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

bool uring_sent(const struct conn_table *t, struct conn *c, uint32_t n)
{
    c->sent += n;
    if (c->sent < t->cfg->msg_size)
        return false;
    count_message();
    return true;
}

enum uring_step uring_send_done(struct conn_table *t, struct conn *c, int res)
{
    if (res == -EINTR)
        return US_SEND;
    if (res == -EAGAIN)
        return US_WAIT;
    if (res <= 0) {
        conn_close(t, c);
        return US_CLOSED;
    }
    if (!uring_sent(t, c, (uint32_t)res))
        return US_SEND;
    c->have = 0;
    return US_RECV;
}

void uring_count_unreaped(struct io_uring *ring, void (*sent)(void *arg, int fd, uint32_t n), void *arg)
{
    struct io_uring_cqe *cqe;
    while (ur_peek_cqe(ring, &cqe) == 0) {
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(ring, cqe);
        if (uring_tag_op(ud) == U_SEND && res > 0)
            sent(arg, uring_tag_fd(ud), (uint32_t)res);
    }
}

enum uring_step uring_writable_done(struct conn_table *t, struct conn *c, int res)
{
    if (uring_writable(res) == UW_WRITABLE)
        return US_SEND;
    count_stalled();
    conn_close(t, c);
    return US_CLOSED;
}
