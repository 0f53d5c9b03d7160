/* config.h -- demux-server's flags once parsed (docs/CONTRACTS.md §1), and the
 * limits they are checked against. */
#ifndef DEMUX_CONFIG_H
#define DEMUX_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "demux_limits.h"

#define MAX_THREADS DEMUX_MAX_THREADS
#define MAX_MSG_SIZE ((unsigned)DEMUX_MAX_MSG_SIZE)
#define MAX_CPUS DEMUX_MAX_CPUS
#define MAX_SLOTS DEMUX_MAX_SLOTS

struct pattern_ops;
struct notifier_ops;

/* How a dispatcher (HSHA's monitor, the proactor's demultiplexer) wakes the handlers it queues work for
 * (--wake; images/README.md, "Fairness rules"). */
enum wake {
    WAKE_BATCH, /* the rule: the notifier call's items are queued, then one sleeper is woken; it relays */
    WAKE_PUT,   /* the named deviation: each put wakes a sleeper (if more sleep than wake-ups are on
                 * their way), as HSHA did before 2026-12 */
};

extern const char *const wake_names[];

struct config {
    const struct pattern_ops *pattern;
    int notifier;                    /* enum notifier_id */
    const struct notifier_ops *nops; /* NULL for notifier none */
    const char *notifier_name;
    int threads;
    int port;
    const char *bind_addr;
    double work_us;
    uint32_t msg_size;
    bool instrument;
    int cpus[MAX_CPUS];
    int ncpus;
    int max_conns; /* -1: not given */
    int stall_ms;  /* a connection that cannot take its reply this long is closed (--stall-ms) */
    enum wake wake; /* --wake; only patterns with a dispatch queue (pattern_ops.queued) take it */
};

/* Parses the command line into *cfg; answers --list, --version and --help
 * itself (exit 0) and refuses bad input with one line (exit 2). */
void config_parse(struct config *cfg, int argc, char **argv);

#endif
