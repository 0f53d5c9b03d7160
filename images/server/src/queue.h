/* queue.h -- the shared queue of Half-Sync/Half-Async and the proactor's
 * completion queue: a growable ring of descriptors under one mutex and one
 * condition variable (seed 000 Fig. 1).
 *
 * Wake-ups are rationed so that the producer (the one demultiplexing thread)
 * does not pay a futex wake per item: a put signals only when more consumers
 * sleep than wake-ups are already on their way (`waiters > signaled`), and the
 * signal is sent after the mutex is released (the woken consumer does not then
 * block on a mutex the producer still holds).  A consumer that takes an item
 * and leaves more behind relays the wake-up to the next sleeper.  No item is
 * stranded: a put that sends no signal saw every sleeper already being woken,
 * and a consumer rechecks the ring under the mutex before it sleeps. */
#ifndef DEMUX_QUEUE_H
#define DEMUX_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;
    int *ring;
    unsigned head, len, cap; /* cap is a power of two */
    int waiters;             /* consumers inside pthread_cond_wait */
    int signaled;            /* wake-ups sent and not yet taken by a woken consumer */
    bool stopped;            /* queue_stop() was called */
};

int queue_init(struct queue *q, unsigned cap);
void queue_destroy(struct queue *q);
/* Timed as `lock` (acquiring the mutex) and `queue_put` (the insertion). */
void queue_put(struct queue *q, int fd);
/* The same without waking anyone: a busy consumer finds the item when it comes back; queue_kick() after
 * a batch wakes one sleeper, which relays.  The proactor's demultiplexer so pays at most one futex wake
 * per notifier call instead of one per message. */
void queue_put_deferred(struct queue *q, int fd);
void queue_kick(struct queue *q);
/* Blocks until an item or queue_stop(); -1 once stopped. */
int queue_get(struct queue *q);
/* Shutdown: every consumer, blocked or not, gets -1 from now on. */
void queue_stop(struct queue *q);

#endif
