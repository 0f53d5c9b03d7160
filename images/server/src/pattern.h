/* pattern.h -- what a pattern (reactor.c, hsha.c, ...) offers the server, and
 * the table of them that --list, the usage text and the flag checks share. */
#ifndef DEMUX_PATTERN_H
#define DEMUX_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct server;

struct pattern_ops {
    const char *name;
    int min_threads, max_threads;
    unsigned notifiers; /* the notifiers it works with: NOTIFIER_BIT()s of notifier.h */
    bool queued;        /* a dispatcher queues work for sleeping handlers: it takes --wake */
    int (*start)(struct server *s);
    void (*wake_all)(struct server *s); /* after the stop flag is set */
    void (*cleanup)(struct server *s);  /* after every thread is joined */
    /* Optional: extra members of the exit JSON, each written as `, "name": value`;
     * called after the join, before cleanup. */
    void (*describe)(struct server *s, FILE *out);
};

extern const struct pattern_ops pattern_reactor, pattern_hsha, pattern_lf, pattern_tpc, pattern_proactor,
    pattern_uring, pattern_uring_shared, pattern_multireactor;

/* In --list order (config.c). */
extern const struct pattern_ops *const pattern_table[];
extern const size_t pattern_count;

#endif
