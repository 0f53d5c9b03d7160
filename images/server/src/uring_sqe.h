/* uring_sqe.h -- taking submission queue entries, bounded (issue 48): what every ring of the server
 * needs and nothing of a connection, so a notifier back-end can use it beside notifier.h.
 *
 * A full submission queue is emptied by submitting it.  A submit that keeps failing (the ring is
 * broken: -EEXIST from a thread that is not a single issuer's owner, -EBADR after lost completions, a
 * transient -EAGAIN or -EBUSY that does not clear) would make a loop that retries it spin for ever
 * under whatever lock guards the submission side, with every thread that needs that lock behind it.
 * So a transient failure is retried a bounded number of times, any other at once, and then the server
 * dies naming the reason: a ring that cannot submit serves no connection. */
#ifndef DEMUX_URING_SQE_H
#define DEMUX_URING_SQE_H

#include "fatal.h"
#include "uring_sys.h"

#include <errno.h>
#include <liburing.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>

#define URING_SUBMIT_TRIES 64 /* transient submit failures in a row before giving up */

/* Room for n more entries (n ≤ the queue's size): what is queued is submitted while there is less. A
 * chain of linked entries is taken after one call for all of them, so no submit can split it. The
 * caller holds whatever guards the ring's submission side. */
static inline void uring_room(struct io_uring *ring, unsigned n)
{
    for (int tries = 0; io_uring_sq_space_left(ring) < n; tries++) {
        int rc = ur_submit(ring);
        if (rc >= 0 && io_uring_sq_space_left(ring) >= n)
            return;
        bool transient = rc == -EINTR || rc == -EAGAIN || rc == -EBUSY || rc >= 0;
        if (!transient || tries + 1 >= URING_SUBMIT_TRIES)
            die("io_uring: the submission queue stays full: submit %s%s",
                rc < 0 ? "failed: " : "made no room", rc < 0 ? strerror(-rc) : "");
        sched_yield();
    }
}

/* A free entry, submitting what is queued while the queue is full. */
static inline struct io_uring_sqe *uring_sqe(struct io_uring *ring)
{
    uring_room(ring, 1);
    return io_uring_get_sqe(ring);
}

#endif
