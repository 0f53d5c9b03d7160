/* queue.h -- the shared queue of Half-Sync/Half-Async and the proactor's
 * completion queue: a growable ring of descriptors under one mutex and one
 * condition variable (seed 000 Fig. 1). */
#ifndef DEMUX_QUEUE_H
#define DEMUX_QUEUE_H

#include "server.h"

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;
    int *ring;
    unsigned head, len, cap; /* cap is a power of two */
};

int queue_init(struct queue *q, unsigned cap);
void queue_destroy(struct queue *q);
/* Timed as `lock` (acquiring the mutex) and `queue_put` (the insertion). */
void queue_put(struct queue *q, int fd);
/* Blocks until an item or shutdown; -1 on shutdown. */
int queue_get(struct queue *q);
void queue_wake_all(struct queue *q);

#endif
