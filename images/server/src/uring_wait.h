/* uring_wait.h -- the completion wait of the io_uring patterns, timed like notifier_wait_timed():
 * uninstrumented one io_uring_submit_and_wait; with --instrument, submit and look for completions
 * without blocking (`notify`, bucketed by how many are ready, at most MAX_EVENTS), and only when there
 * are none block for one (`idle`). With submit = false the caller has submitted (other threads share
 * the submission side under a lock) and only the completion side is touched. Returns how many completions the caller should take (≤ MAX_EVENTS;
 * 0 after an interrupted wait). */
#ifndef DEMUX_URING_WAIT_H
#define DEMUX_URING_WAIT_H

#include "fatal.h"
#include "uring_sys.h"
#include "instr.h"

#include <errno.h>
#include <liburing.h>
#include <string.h>

static inline int uring_ready(struct io_uring *ring)
{
    unsigned n = io_uring_cq_ready(ring);
    return n > MAX_EVENTS ? MAX_EVENTS : (int)n;
}

static inline int uring_wait_timed(struct io_uring *ring, bool submit)
{
    struct io_uring_cqe *cqe;
    int rc;
    if (!instr_on()) {
        rc = submit ? ur_submit_and_wait(ring, 1) : ur_wait_cqe(ring, &cqe);
        if (rc < 0 && rc != -EINTR && rc != -EBUSY)
            die("io_uring wait: %s", strerror(-rc));
        return uring_ready(ring);
    }
    uint64_t t0 = now_ns();
    /* Submitting also runs completions waiting as task work (deferred ones too). */
    rc = submit ? ur_submit_and_get_events(ring) : 0;
    if (rc < 0 && rc != -EINTR && rc != -EBUSY)
        die("io_uring_submit: %s", strerror(-rc));
    int n = uring_ready(ring);
    if (n > 0) {
        instr_notify(t0, n);
        return n;
    }
    rc = ur_wait_cqe(ring, &cqe);
    if (rc < 0 && rc != -EINTR)
        die("io_uring_wait_cqe: %s", strerror(-rc));
    n = uring_ready(ring);
    instr_end(OP_IDLE, t0);
    instr_wait_events(n);
    return n;
}

#endif
