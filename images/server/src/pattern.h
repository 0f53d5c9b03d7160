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

/* Every pattern, in --list order: one line each, X(ops), ops the pattern_ops its file defines. Adding a
 * pattern is its file (defining `const struct pattern_ops pattern_x`) and its line here: the declarations
 * below and config.c's table come from it. */
#define PATTERN_TABLE(X)                                                                                    \
    X(pattern_reactor)                                                                                      \
    X(pattern_hsha)                                                                                         \
    X(pattern_lf)                                                                                           \
    X(pattern_tpc)                                                                                          \
    X(pattern_proactor)                                                                                     \
    X(pattern_uring)                                                                                        \
    X(pattern_multireactor)                                                                                 \
    X(pattern_uring_shared)

#define PATTERN_DECLARE_(ops) extern const struct pattern_ops ops;
PATTERN_TABLE(PATTERN_DECLARE_)
#undef PATTERN_DECLARE_

/* In --list order (config.c, from PATTERN_TABLE). */
extern const struct pattern_ops *const pattern_table[];
extern const size_t pattern_count;

#endif
