/* uring_sqe_stuck.c -- test_uring_rules.py's probe of uring_sqe() (images/server/src/uring_sqe.h) on a
 * ring whose submits all fail: a single-issuer ring, its one-entry submission queue full, asked for an
 * entry from a thread that is not its owner (the kernel answers every submit with -EEXIST). The fixed
 * helper dies with "demux-server: io_uring: ..." (exit 1); an unbounded retry never returns. */
#include "uring_sqe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static struct io_uring ring;

static void *other_thread(void *arg)
{
    (void)arg;
    uring_sqe(&ring);
    return NULL;
}

int main(void)
{
    struct io_uring_params p = {0};
    p.flags = IORING_SETUP_SINGLE_ISSUER;
    int rc = io_uring_queue_init_params(1, &ring, &p);
    if (rc < 0) {
        fprintf(stderr, "probe: cannot create a single-issuer ring: %s\n", strerror(-rc));
        return 3;
    }
    io_uring_prep_nop(io_uring_get_sqe(&ring)); /* the queue is full now */
    pthread_t t;
    if (pthread_create(&t, NULL, other_thread, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    fprintf(stderr, "probe: uring_sqe returned an entry\n");
    return 0;
}
