/* notify_uring.c -- io_uring used as a readiness notifier: each arm is a
 * one-shot IORING_OP_POLL_ADD (POLLIN, or POLLOUT for arm_write), so a
 * reported descriptor stays deactivated until it is re-armed.  The submission queue has a single producer side, so
 * arms from any thread go through the interest-set lock; only the waiter
 * consumes completions.
 *
 * Arms are submitted in batches (issue 24): an arm made while no thread is
 * blocked in wait() is only queued, and the next wait() submits every queued
 * one in one io_uring_enter; an arm made while the waiter is blocked is
 * submitted at once, since the waiter would not see it otherwise.  A reactor,
 * which re-arms between its own waits, so pays one submission per batch
 * instead of one per message. */
#include "notifier.h"
#include "uring_sys.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>

#define URING_WAKE UINT64_MAX

struct ur {
    struct notifier base;
    pthread_mutex_t sq_lock; /* the interest-set lock: the submission side and the two fields below */
    struct io_uring ring;
    bool waiting;     /* a thread is blocked in wait(): arms go in at once */
    unsigned pending; /* arms queued, not yet submitted */
};

static struct notifier *ur_create(const struct notifier_env *env)
{
    int maxfd = env->maxfd;
    struct ur *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    struct io_uring_params p = {0};
    unsigned entries = 4096;
    /* Every armed descriptor can complete at once; keep room for all. */
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP; /* the kernel's maximum where maxfd asks for more */
    p.cq_entries = (unsigned)maxfd + 64 > 2 * entries ? (unsigned)maxfd + 64 : 2 * entries;
    int rc = io_uring_queue_init_params(entries, &n->ring, &p);
    if (rc < 0) {
        free(n);
        errno = -rc;
        return NULL;
    }
    notifier_init(&n->base, &notifier_uring, env);
    pthread_mutex_init(&n->sq_lock, NULL);
    return &n->base;
}

static void ur_destroy(struct notifier *b)
{
    struct ur *n = (struct ur *)b;
    io_uring_queue_exit(&n->ring);
    pthread_mutex_destroy(&n->sq_lock);
    free(n);
}

/* Called with sq_lock held.  A full submission queue is submitted once to make room; if that fails the
 * queue stays full and NULL says so (the caller's arm fails, with nothing of it queued), rather than
 * retrying for good under the lock. */
static struct io_uring_sqe *get_sqe(struct ur *n)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&n->ring);
    if (sqe == NULL && ur_submit(&n->ring) >= 0) {
        n->pending = 0;
        sqe = io_uring_get_sqe(&n->ring);
    }
    return sqe;
}

/* Once the poll is in the submission queue the arm stands, whatever the submission does: the kernel
 * takes every queued entry at the next io_uring_enter, so a submission that fails (EAGAIN, EBUSY) leaves
 * it queued for the next one (a later arm's, a wake's, or the waiter's before it blocks), and the arm is
 * reported as made.  Reporting it failed would have the caller close a descriptor whose poll the kernel
 * then takes anyway, for whatever connection has that number by then. */
static int ur_arm_events(struct notifier *b, int fd, unsigned events)
{
    struct ur *n = (struct ur *)b;
    notifier_lock(&n->base, &n->sq_lock);
    struct io_uring_sqe *sqe = get_sqe(n);
    if (sqe == NULL) {
        pthread_mutex_unlock(&n->sq_lock);
        return -1;
    }
    io_uring_prep_poll_add(sqe, fd, events);
    io_uring_sqe_set_data64(sqe, (uint64_t)fd);
    n->pending++;
    if (n->waiting && ur_submit(&n->ring) >= 0)
        n->pending = 0;
    pthread_mutex_unlock(&n->sq_lock);
    return 0;
}

static int ur_arm(struct notifier *b, int fd)
{
    return ur_arm_events(b, fd, POLLIN);
}

static int ur_arm_write(struct notifier *b, int fd)
{
    return ur_arm_events(b, fd, POLLOUT);
}

/* A no-op: the contract (notifier.h) deletes only descriptors that are not armed, so no poll of it is in
 * the kernel.  (Deleting an armed one would need IORING_OP_POLL_REMOVE, and its cancelled poll would still
 * complete, naming a descriptor number that may belong to another connection by then.) */
static int ur_del(struct notifier *b, int fd)
{
    (void)b;
    (void)fd;
    return 0;
}

static int ur_wait(struct notifier *b, int *fds, int max, bool block)
{
    struct ur *n = (struct ur *)b;
    struct io_uring_cqe *cqe;
    notifier_lock(&n->base, &n->sq_lock);
    int rc = n->pending > 0 ? ur_submit(&n->ring) : 0;
    /* The kernel short of memory or of completion room: the queued arms stay queued for the next
     * call's submission, and this one only reaps (without blocking, so that the next comes soon). */
    bool retry = rc == -EAGAIN || rc == -EBUSY;
    if (rc >= 0)
        n->pending = 0;
    if (retry)
        block = false;
    n->waiting = block && rc >= 0;
    pthread_mutex_unlock(&n->sq_lock);
    if (rc < 0 && !retry)
        return -1;
    rc = block ? ur_wait_cqe(&n->ring, &cqe) : ur_peek_cqe(&n->ring, &cqe);
    if (block) {
        notifier_lock(&n->base, &n->sq_lock);
        n->waiting = false;
        pthread_mutex_unlock(&n->sq_lock);
    }
    if (rc == -EAGAIN && !block)
        return 0;
    if (rc < 0)
        return rc == -EINTR ? 0 : -1;
    int got = 0;
    while (got < max && ur_peek_cqe(&n->ring, &cqe) == 0) {
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        io_uring_cqe_seen(&n->ring, cqe);
        /* A failed poll is reported too: the handler's read then sees the
         * error and closes the connection. */
        if (ud != URING_WAKE)
            fds[got++] = (int)ud;
    }
    return got;
}

static void ur_wake(struct notifier *b)
{
    struct ur *n = (struct ur *)b;
    pthread_mutex_lock(&n->sq_lock);
    struct io_uring_sqe *sqe = get_sqe(n);
    if (sqe != NULL) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data64(sqe, URING_WAKE);
        n->pending++;
    }
    /* Whatever is queued goes in; a failed submission leaves it for the waiter's next one. */
    if (ur_submit(&n->ring) >= 0)
        n->pending = 0;
    pthread_mutex_unlock(&n->sq_lock);
}

const struct notifier_ops notifier_uring = {
    .edge = false,
    .create = ur_create,
    .destroy = ur_destroy,
    .add = ur_arm,
    .del = ur_del,
    .rearm = ur_arm,
    .arm_write = ur_arm_write,
    .wait = ur_wait,
    .wake = ur_wake,
};
