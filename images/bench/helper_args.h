/* helper_args.h -- the command line the two-CPU bench helpers share (cpu-pingpong,
 * wake-cost): --cpus A,B, two different CPUs, required, and one count option
 * --NAME N within a range. A bad option is one line on stderr and exit 2. */
#ifndef DEMUX_HELPER_ARGS_H
#define DEMUX_HELPER_ARGS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

struct helper_args {
    const char *prog;      /* the helper's name, first on every error line */
    const char *count_opt; /* the count option's name, without the dashes */
    uint64_t min, max;     /* its range */
    const char *range;     /* the range as the error says it, e.g. "5 to 2^32" */
};

static inline int helper_usage(const struct helper_args *h, const char *what)
{
    fprintf(stderr, "%s: %s (usage: %s --cpus A,B [--%s N])\n", h->prog, what, h->prog, h->count_opt);
    return 2;
}

/* Fills cpus and *count (left as it is when the option is not given): 0, or the exit status 2 after the
 * error line. */
static inline int parse_helper_args(const struct helper_args *h, int argc, char **argv, int cpus[2],
                                    uint64_t *count)
{
    const struct option longopts[] = {
        {"cpus", required_argument, NULL, 'c'}, {h->count_opt, required_argument, NULL, 'n'}, {NULL, 0, NULL, 0}};
    int ncpus = 0, ch;
    char why[96];
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (ch == 'c') {
            ncpus = parse_cpu_list(optarg, cpus, 2);
            if (ncpus != 2 || cpus[0] == cpus[1])
                return helper_usage(h, "--cpus needs two different CPUs, as A,B");
        } else if (ch == 'n') {
            if (parse_u64(optarg, h->min, h->max, count) < 0) {
                snprintf(why, sizeof(why), "--%s needs a whole number from %s", h->count_opt, h->range);
                return helper_usage(h, why);
            }
        } else {
            return helper_usage(h, "unknown option");
        }
    }
    return ncpus == 2 ? 0 : helper_usage(h, "--cpus is required");
}

#endif
