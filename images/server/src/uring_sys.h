/* uring_sys.h -- liburing's calls, counted as the system calls they enter the kernel with (sysc.h).
 *
 * liburing 2.3 enters the kernel (io_uring_enter) only when it must, and its choice is made from the
 * ring's state before the call, which these wrappers read the same way: io_uring_submit enters when
 * entries are queued or the kernel asks for a flush (IORING_SQ_CQ_OVERFLOW or IORING_SQ_TASKRUN in the
 * ring's flags); io_uring_submit_and_wait and io_uring_submit_and_get_events always enter; a wait for a
 * completion enters when none is ready; a peek when none is ready and the kernel asks for a flush.
 * None of the server's rings uses SQPOLL or IOPOLL, which would change those rules.  Registrations are
 * one io_uring_register each. */
#ifndef DEMUX_URING_SYS_H
#define DEMUX_URING_SYS_H

#include <liburing.h>

#include "sysc.h"

static inline bool uring_needs_flush(const struct io_uring *ring)
{
    return (IO_URING_READ_ONCE(*ring->sq.kflags) & (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN)) != 0;
}

static inline int ur_submit(struct io_uring *ring)
{
    if (io_uring_sq_ready(ring) > 0 || uring_needs_flush(ring))
        sysc_add(1);
    return io_uring_submit(ring);
}

static inline int ur_submit_and_wait(struct io_uring *ring, unsigned nr)
{
    sysc_add(1);
    return io_uring_submit_and_wait(ring, nr);
}

static inline int ur_submit_and_get_events(struct io_uring *ring)
{
    sysc_add(1);
    return io_uring_submit_and_get_events(ring);
}

static inline int ur_wait_cqe(struct io_uring *ring, struct io_uring_cqe **cqe)
{
    if (io_uring_cq_ready(ring) == 0)
        sysc_add(1);
    return io_uring_wait_cqe(ring, cqe);
}

static inline int ur_peek_cqe(struct io_uring *ring, struct io_uring_cqe **cqe)
{
    if (io_uring_cq_ready(ring) == 0 && uring_needs_flush(ring))
        sysc_add(1);
    return io_uring_peek_cqe(ring, cqe);
}

#endif
