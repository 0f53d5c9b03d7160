/* sysc.c -- see sysc.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sysc.h"

#include <errno.h> /* program_invocation_short_name */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

_Thread_local struct sysc_cell *sysc_self;

static pthread_mutex_t sysc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sysc_cell *_Atomic sysc_head;

struct sysc_cell *sysc_register(void)
{
    if (sysc_self != NULL)
        return sysc_self;
    struct sysc_cell *c = aligned_alloc(64, sizeof(*c));
    if (c == NULL) {
        fprintf(stderr, "%s: out of memory for a system-call counter\n", program_invocation_short_name);
        exit(1);
    }
    atomic_init(&c->n, 0);
    atomic_init(&c->ended, false);
    c->tid = (int)gettid();
    pthread_mutex_lock(&sysc_lock);
    c->next = atomic_load_explicit(&sysc_head, memory_order_relaxed);
    atomic_store_explicit(&sysc_head, c, memory_order_release);
    pthread_mutex_unlock(&sysc_lock);
    sysc_self = c;
    return c;
}

void sysc_end(void)
{
    if (sysc_self != NULL)
        atomic_store_explicit(&sysc_self->ended, true, memory_order_release);
}

struct sysc_cell *sysc_cells(void)
{
    return atomic_load_explicit(&sysc_head, memory_order_acquire);
}

uint64_t sysc_total(void)
{
    uint64_t sum = 0;
    for (const struct sysc_cell *c = sysc_cells(); c != NULL; c = c->next)
        sum += sysc_of(c);
    return sum;
}

uint64_t sysc_write_live(FILE *out)
{
    uint64_t total = 0;
    bool first = true;
    for (const struct sysc_cell *c = sysc_cells(); c != NULL; c = c->next) {
        uint64_t n = sysc_of(c);
        total += n;
        if (atomic_load_explicit(&c->ended, memory_order_acquire))
            continue;
        fprintf(out, "%s{\"tid\": %d, \"syscalls\": %llu}", first ? "" : ", ", c->tid, (unsigned long long)n);
        first = false;
    }
    return total;
}
