/* config.c -- the command line: flags, --list, --help, --version, and the
 * checks that refuse bad input with one line (docs/CONTRACTS.md §1). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fatal.h"
#include "notifier.h"
#include "pattern.h"
#include "util.h"

#ifndef DEMUX_BUILD_INFO
#define DEMUX_BUILD_INFO "source=unknown compiler=unknown flags=unknown"
#endif

#define PATTERN_ENTRY_(ops) &ops,
const struct pattern_ops *const pattern_table[] = {PATTERN_TABLE(PATTERN_ENTRY_)};
#undef PATTERN_ENTRY_
const size_t pattern_count = sizeof(pattern_table) / sizeof(pattern_table[0]);

const char *const wake_names[] = {[WAKE_BATCH] = "batch", [WAKE_PUT] = "put"};

static void print_list(void)
{
    bool first = true;
    putchar('[');
    for (size_t i = 0; i < pattern_count; i++) {
        const struct pattern_ops *p = pattern_table[i];
        for (int n = 0; n < NOTIFIER_COUNT; n++) {
            if (!(p->notifiers & NOTIFIER_BIT(n)))
                continue;
            printf("%s{\"pattern\": \"%s\", \"notifier\": \"%s\", \"min_threads\": %d, \"max_threads\": %d}",
                   first ? "" : ", ", p->name, notifier_kinds[n].name, p->min_threads, p->max_threads);
            first = false;
        }
    }
    puts("]");
}

static void print_help(void)
{
    puts("usage: demux-server --pattern P --notifier N --threads T --port PORT [--bind ADDR]\n"
         "                    [--work-us W] [--msg-size B] [--instrument] [--cpus LIST] [--max-conns N]\n"
         "                    [--stall-ms MS] [--wake batch|put]\n"
         "       demux-server --list | --version | --help\n"
         "Echo server: reads B-byte messages, spins W us of its thread's CPU per message, echoes them back.\n"
         "A connection that cannot take its echo for MS ms (default 5000) is dropped and counted stalled.\n"
         "--wake (hsha, proactor, uring-shared): how the dispatcher wakes its handlers, one per notifier\n"
         "call or completion batch (batch, the default) or one per queued item (put).\n"
         "--list prints the valid (pattern, notifier) pairs and their thread ranges as JSON.\n"
         "On SIGTERM/SIGINT it stops, joins every thread and prints one exit JSON line.");
}

/* "a b c": the names the tables hold, for the usage errors. */
static const char *pattern_names(void)
{
    static char buf[256];
    size_t off = 0;
    for (size_t i = 0; i < pattern_count; i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? " " : "", pattern_table[i]->name);
    return buf;
}

static const char *notifier_names(void)
{
    static char buf[256];
    size_t off = 0;
    for (int i = 0; i < NOTIFIER_COUNT; i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? " " : "", notifier_kinds[i].name);
    return buf;
}

void config_parse(struct config *cfg, int argc, char **argv)
{
    enum { O_PATTERN = 256, O_NOTIFIER, O_THREADS, O_PORT, O_BIND, O_WORK, O_MSG, O_INSTR, O_CPUS, O_MAXC,
           O_STALL, O_WAKE, O_LIST, O_VERSION, O_HELP };
    static const struct option opts[] = {
        {"pattern", required_argument, NULL, O_PATTERN}, {"notifier", required_argument, NULL, O_NOTIFIER},
        {"threads", required_argument, NULL, O_THREADS}, {"port", required_argument, NULL, O_PORT},
        {"bind", required_argument, NULL, O_BIND},       {"work-us", required_argument, NULL, O_WORK},
        {"msg-size", required_argument, NULL, O_MSG},    {"instrument", no_argument, NULL, O_INSTR},
        {"cpus", required_argument, NULL, O_CPUS},       {"max-conns", required_argument, NULL, O_MAXC},
        {"stall-ms", required_argument, NULL, O_STALL},  {"wake", required_argument, NULL, O_WAKE},
        {"list", no_argument, NULL, O_LIST},             {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, O_HELP},             {NULL, 0, NULL, 0},
    };
    const char *pattern = NULL, *threads = NULL, *port = NULL, *wake = NULL;
    uint64_t v;
    memset(cfg, 0, sizeof(*cfg));
    cfg->msg_size = 1;
    cfg->bind_addr = "0.0.0.0";
    cfg->max_conns = -1;
    cfg->stall_ms = DEMUX_DEFAULT_STALL_MS;
    opterr = 0;
    for (;;) {
        int o = getopt_long(argc, argv, "", opts, NULL);
        if (o == -1)
            break;
        switch (o) {
        case O_PATTERN:
            pattern = optarg;
            break;
        case O_NOTIFIER:
            cfg->notifier_name = optarg;
            break;
        case O_THREADS:
            threads = optarg;
            break;
        case O_PORT:
            port = optarg;
            break;
        case O_BIND:
            cfg->bind_addr = optarg;
            break;
        case O_WORK:
            if (parse_double(optarg, 0, DEMUX_MAX_WORK_US, &cfg->work_us) < 0)
                usage_error("bad --work-us '%s' (a number of microseconds, 0..1000000)", optarg);
            break;
        case O_MSG:
            if (parse_u64(optarg, 1, MAX_MSG_SIZE, &v) < 0)
                usage_error("bad --msg-size '%s' (bytes, 1..%u)", optarg, MAX_MSG_SIZE);
            cfg->msg_size = (uint32_t)v;
            break;
        case O_INSTR:
            cfg->instrument = true;
            break;
        case O_CPUS:
            cfg->ncpus = parse_cpu_list(optarg, cfg->cpus, MAX_CPUS);
            if (cfg->ncpus <= 0)
                usage_error("bad --cpus '%s' (a CPU list such as 0-3,8)", optarg);
            break;
        case O_MAXC:
            if (parse_u64(optarg, 1, MAX_SLOTS, &v) < 0)
                usage_error("bad --max-conns '%s' (1..%d)", optarg, MAX_SLOTS);
            cfg->max_conns = (int)v;
            break;
        case O_STALL:
            if (parse_u64(optarg, 1, DEMUX_MAX_STALL_MS, &v) < 0)
                usage_error("bad --stall-ms '%s' (milliseconds, 1..%d)", optarg, DEMUX_MAX_STALL_MS);
            cfg->stall_ms = (int)v;
            break;
        case O_WAKE:
            if (strcmp(optarg, "batch") == 0)
                cfg->wake = WAKE_BATCH;
            else if (strcmp(optarg, "put") == 0)
                cfg->wake = WAKE_PUT;
            else
                usage_error("bad --wake '%s' (batch or put)", optarg);
            wake = optarg;
            break;
        case O_LIST:
            print_list();
            exit(0);
        case O_VERSION:
            puts("demux-server " DEMUX_BUILD_INFO);
            exit(0);
        case O_HELP:
            print_help();
            exit(0);
        case ':':
            usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            usage_error("unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s' (see --help)", argv[optind]);
    if (pattern == NULL)
        usage_error("missing --pattern (see --list)");
    if (cfg->notifier_name == NULL)
        usage_error("missing --notifier (see --list)");
    if (threads == NULL)
        usage_error("missing --threads");
    if (port == NULL)
        usage_error("missing --port");
    for (size_t i = 0; i < pattern_count; i++)
        if (strcmp(pattern_table[i]->name, pattern) == 0)
            cfg->pattern = pattern_table[i];
    if (cfg->pattern == NULL)
        usage_error("unknown pattern '%s' (one of %s)", pattern, pattern_names());
    cfg->notifier = notifier_find(cfg->notifier_name);
    if (cfg->notifier < 0)
        usage_error("unknown notifier '%s' (one of %s)", cfg->notifier_name, notifier_names());
    const struct pattern_ops *p = cfg->pattern;
    if (!(p->notifiers & NOTIFIER_BIT(cfg->notifier)))
        usage_error("invalid pair: pattern '%s' does not work with notifier '%s' (see --list)", pattern,
                    cfg->notifier_name);
    cfg->nops = notifier_kinds[cfg->notifier].ops;
    if (parse_u64(threads, (uint64_t)p->min_threads, (uint64_t)p->max_threads, &v) < 0)
        usage_error("bad --threads '%s' for pattern '%s' (%d..%d)", threads, pattern, p->min_threads,
                    p->max_threads);
    cfg->threads = (int)v;
    if (wake != NULL && !p->queued)
        usage_error("--wake applies to patterns with a dispatch queue (hsha, proactor, uring-shared), not '%s'",
                    pattern);
    if (parse_u64(port, 0, 65535, &v) < 0)
        usage_error("bad --port '%s' (0..65535)", port);
    cfg->port = (int)v;
}
