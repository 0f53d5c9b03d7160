/* queue.c -- see queue.h. */
#include "queue.h"

#include "fatal.h"
#include "instr.h"

#include <stdlib.h>

int queue_init(struct queue *q, unsigned cap)
{
    unsigned c = 64;
    while (c < cap)
        c *= 2;
    q->ring = malloc(c * sizeof(*q->ring));
    if (q->ring == NULL)
        return -1;
    q->cap = c;
    q->head = q->len = 0;
    q->waiters = q->signaled = 0;
    q->stopped = false;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->nonempty, NULL);
    return 0;
}

void queue_destroy(struct queue *q)
{
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->nonempty);
    free(q->ring);
}

/* Called with the lock held.  Edge-triggered notifiers can queue one
 * connection several times, so the bound is not the connection count. */
static void grow(struct queue *q)
{
    int *r = malloc(2 * q->cap * sizeof(*r));
    if (r == NULL)
        die("out of memory growing the queue to %u entries", 2 * q->cap);
    for (unsigned i = 0; i < q->len; i++)
        r[i] = q->ring[(q->head + i) & (q->cap - 1)];
    free(q->ring);
    q->ring = r;
    q->head = 0;
    q->cap *= 2;
}

static void put(struct queue *q, int fd, bool wake_now)
{
    lock_timed(&q->lock);
    uint64_t t0 = instr_start();
    if (q->len == q->cap)
        grow(q);
    q->ring[(q->head + q->len) & (q->cap - 1)] = fd;
    q->len++;
    bool wake = wake_now && q->waiters > q->signaled;
    if (wake)
        q->signaled++;
    instr_end(OP_QUEUE_PUT, t0);
    pthread_mutex_unlock(&q->lock);
    if (wake) /* a waiter sleeps (waiters > signaled): the signal is a futex wake, counted */
        SYSC(pthread_cond_signal(&q->nonempty));
}

void queue_put(struct queue *q, int fd)
{
    put(q, fd, true);
}

void queue_put_deferred(struct queue *q, int fd)
{
    put(q, fd, false);
}

void queue_kick(struct queue *q)
{
    lock_timed(&q->lock);
    bool wake = q->len > 0 && q->waiters > q->signaled;
    if (wake)
        q->signaled++;
    pthread_mutex_unlock(&q->lock);
    if (wake) /* a waiter sleeps (waiters > signaled): the signal is a futex wake, counted */
        SYSC(pthread_cond_signal(&q->nonempty));
}

int queue_get(struct queue *q)
{
    lock_timed(&q->lock);
    if (q->len == 0 && !q->stopped) {
        uint64_t t0 = instr_start(); /* blocked waiting for work: idle */
        while (q->len == 0 && !q->stopped) {
            q->waiters++;
            SYSC(pthread_cond_wait(&q->nonempty, &q->lock));
            q->waiters--;
            if (q->signaled > 0) /* ours, or a spurious wake-up standing in for it */
                q->signaled--;
        }
        instr_end(OP_IDLE, t0);
    }
    if (q->stopped) {
        pthread_mutex_unlock(&q->lock);
        return -1;
    }
    uint64_t t0 = instr_start();
    int fd = q->ring[q->head];
    q->head = (q->head + 1) & (q->cap - 1);
    q->len--;
    bool relay = q->len > 0 && q->waiters > q->signaled;
    if (relay)
        q->signaled++;
    instr_end(OP_QUEUE_GET, t0);
    pthread_mutex_unlock(&q->lock);
    if (relay)
        SYSC(pthread_cond_signal(&q->nonempty));
    return fd;
}

void queue_stop(struct queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->stopped = true;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}
