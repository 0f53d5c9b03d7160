/* main.c -- demux-client: options, setup, and the JSON report (CONTRACTS.md §2).
 *
 * Exit status: 0 with a report, 1 when the run failed (refused, reset, stall,
 * wrong bytes; the reason on stderr and, with --json, {"ok": false}), 2 on bad
 * flags. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* The Makefile defines it: a hash of the exact sources, the compiler and the flags. */
#ifndef DEMUX_BUILD_INFO
#define DEMUX_BUILD_INFO "source=unknown compiler=unknown flags=unknown"
#endif

#define PROG "demux-client"

static const char usage_text[] =
    "usage: " PROG " --host H --port PORT --connections C --threads T --msg-size B\n"
    "                    --warmup S --duration S [--cooldown S] [--cpus LIST] [--rate R]\n"
    "                    [--stall-timeout S] [--progress] [--phase-events] [--json FILE]\n"
    "       " PROG " --version | --help\n"
    "\n"
    "Drives an echo server over C TCP connections spread across T threads (each\n"
    "with its own epoll), checks every echoed byte, and reports throughput and\n"
    "latency of the measure phase as JSON (to FILE, else stdout).\n"
    "\n"
    "  --host H            server address or name\n"
    "  --port PORT         server port (1-65535)\n"
    "  --connections C     TCP connections, connected before the warm-up\n"
    "  --threads T         client threads (1..C)\n"
    "  --msg-size B        bytes per message (1..67108864)\n"
    "  --warmup S          seconds before measuring\n"
    "  --duration S        seconds measured (> 0)\n"
    "  --cooldown S        seconds of load after measuring (default 0)\n"
    "  --cpus LIST         pin thread i to the (i mod n)-th CPU of LIST, e.g. 0-3,8\n"
    "  --rate R            open loop: Poisson arrivals at R msg/s in total; latency\n"
    "                      counts from the intended send time, and the report says how\n"
    "                      late each send left (default: closed loop, one message in\n"
    "                      flight per connection)\n"
    "  --stall-timeout S   fail when a connection makes no progress for S seconds\n"
    "                      (default 5)\n"
    "  --progress          print each measured second's throughput on stderr as it\n"
    "                      completes ({\"event\": \"second\", ...}), and end the measure\n"
    "                      phase early on SIGUSR1, after the seconds printed (the\n"
    "                      cool-down follows; the report says stopped_early and counts\n"
    "                      those seconds only)\n"
    "  --phase-events      print the measure phase's start and end on stderr as they\n"
    "                      pass ({\"event\": \"phase\", \"phase\": \"measure\" | \"cooldown\",\n"
    "                      \"t_ns\": CLOCK_MONOTONIC ns}): a launcher reads the kernel's\n"
    "                      counters there\n"
    "  --json FILE         write the report to FILE (atomically) instead of stdout\n"
    "\n"
    "Exit status: 0 ok, 1 the run failed (reason on stderr), 2 bad flags.\n";

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
    va_list ap;
    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static uint64_t opt_u64(const char *name, const char *v, uint64_t min, uint64_t max)
{
    uint64_t out;
    if (parse_u64(v, min, max, &out) < 0)
        die_usage("--%s: invalid value '%s' (expected an integer %llu..%llu)", name, v,
                  (unsigned long long)min, (unsigned long long)max);
    return out;
}

static double opt_double(const char *name, const char *v, double min, double max, int min_exclusive)
{
    double out;
    if (parse_double(v, min, max, &out) < 0 || (min_exclusive && out <= min))
        die_usage("--%s: invalid value '%s' (expected a number %s %g and <= %g)", name, v,
                  min_exclusive ? ">" : ">=", min, max);
    return out;
}

enum { O_HOST = 1, O_PORT, O_CONNS, O_THREADS, O_MSG, O_WARMUP, O_DURATION, O_COOLDOWN, O_CPUS, O_RATE,
       O_STALL, O_JSON, O_VERSION, O_HELP, O_PROGRESS, O_PHASE_EVENTS };

static void parse_options(int argc, char **argv, struct options *opt)
{
    static const struct option longopts[] = {
        {"host", required_argument, NULL, O_HOST},
        {"port", required_argument, NULL, O_PORT},
        {"connections", required_argument, NULL, O_CONNS},
        {"threads", required_argument, NULL, O_THREADS},
        {"msg-size", required_argument, NULL, O_MSG},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"duration", required_argument, NULL, O_DURATION},
        {"cooldown", required_argument, NULL, O_COOLDOWN},
        {"cpus", required_argument, NULL, O_CPUS},
        {"rate", required_argument, NULL, O_RATE},
        {"stall-timeout", required_argument, NULL, O_STALL},
        {"json", required_argument, NULL, O_JSON},
        {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, O_HELP},
        {"progress", no_argument, NULL, O_PROGRESS},
        {"phase-events", no_argument, NULL, O_PHASE_EVENTS},
        {NULL, 0, NULL, 0},
    };
    unsigned seen = 0;
    int ch;

    memset(opt, 0, sizeof(*opt));
    opt->stall_timeout_s = 5.0;
    opterr = 0;
    /* "+" stops at the first non-option so stray words are reported, not permuted away. */
    while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
        if (ch == '?' || ch == ':') {
            const char *bad = argv[optind - 1];
            if (optopt != 0 || (bad != NULL && strchr(bad, '=') == NULL && ch == ':'))
                die_usage("option '%s' needs a value (see --help)", bad);
            die_usage("unknown option '%s' (see --help)", bad);
        }
        if (ch > 0 && ch < 32 && (seen & (1u << ch)) && ch != O_VERSION && ch != O_HELP)
            die_usage("option '--%s' given twice", longopts[ch - 1].name);
        if (ch > 0 && ch < 32)
            seen |= 1u << ch;
        switch (ch) {
        case O_HOST:
            if (optarg[0] == '\0')
                die_usage("--host: empty value");
            opt->host = optarg;
            break;
        case O_PORT: opt->port = (uint16_t)opt_u64("port", optarg, 1, 65535); break;
        case O_CONNS: opt->connections = (uint32_t)opt_u64("connections", optarg, 1, CLIENT_MAX_CONNS); break;
        case O_THREADS: opt->threads = (uint32_t)opt_u64("threads", optarg, 1, CLIENT_MAX_THREADS); break;
        case O_MSG: opt->msg_size = (uint32_t)opt_u64("msg-size", optarg, 1, CLIENT_MAX_MSG); break;
        case O_WARMUP: opt->warmup_s = opt_double("warmup", optarg, 0, DEMUX_MAX_PHASE_S, 0); break;
        case O_DURATION: opt->duration_s = opt_double("duration", optarg, 0, DEMUX_MAX_PHASE_S, 1); break;
        case O_COOLDOWN: opt->cooldown_s = opt_double("cooldown", optarg, 0, DEMUX_MAX_PHASE_S, 0); break;
        case O_RATE: opt->rate = opt_double("rate", optarg, 0, DEMUX_MAX_RATE, 1); break;
        case O_STALL: opt->stall_timeout_s = opt_double("stall-timeout", optarg, 0, DEMUX_MAX_PHASE_S, 1); break;
        case O_JSON:
            if (optarg[0] == '\0')
                die_usage("--json: empty file name");
            opt->json_path = optarg;
            break;
        case O_CPUS:
            opt->ncpus = parse_cpu_list(optarg, opt->cpus, CLIENT_MAX_CPUS);
            if (opt->ncpus < 0)
                die_usage("--cpus: invalid CPU list '%s' (expected e.g. 0-3,8)", optarg);
            break;
        case O_VERSION:
            puts(PROG " " DEMUX_BUILD_INFO);
            exit(0);
        case O_HELP: fputs(usage_text, stdout); exit(0);
        case O_PROGRESS: opt->progress = 1; break;
        case O_PHASE_EVENTS: opt->phase_events = 1; break;
        default: die_usage("unknown option (see --help)");
        }
    }
    if (optind < argc)
        die_usage("unexpected argument '%s' (see --help)", argv[optind]);
    static const struct {
        int flag;
        const char *name;
    } required[] = {{O_HOST, "host"},         {O_PORT, "port"},     {O_CONNS, "connections"},
                    {O_THREADS, "threads"},   {O_MSG, "msg-size"},  {O_WARMUP, "warmup"},
                    {O_DURATION, "duration"}};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if (!(seen & (1u << required[i].flag)))
            die_usage("missing required option --%s (see --help)", required[i].name);
    if (opt->threads > opt->connections)
        die_usage("--threads %u exceeds --connections %u (every thread needs a connection)", opt->threads,
                  opt->connections);
}

/* ---- report ---- */

static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void put_hist_us(FILE *f, const char *name, const struct hist *h)
{
    fprintf(f,
            ", \"%s\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f, "
            "\"mean\": %.3f, \"count\": %llu}",
            name, hist_percentile(h, 50) / 1e3, hist_percentile(h, 90) / 1e3, hist_percentile(h, 99) / 1e3,
            hist_percentile(h, 99.9) / 1e3, hist_max(h) / 1e3, hist_mean(h) / 1e3,
            (unsigned long long)hist_count(h));
}

/* Everything the report counts is of one population: the requests whose intended start falls in the
 * seconds measured (all of them, or those kept by an early stop), completed before the run's end; the
 * books cover the same seconds. */
static void put_report(FILE *f, const struct run *run, const struct worker *ws)
{
    const struct options *opt = run->opt;
    static struct hist lat, late;
    uint64_t messages = 0, offered = 0, calls = 0, spin_ns = 0, syscalls = 0, gaps[GAP_BINS] = {0};
    double user = 0, sys = 0, wait = 0;
    long sleeps = 0;
    bool open = opt->rate > 0;
    /* Stopped early: the seconds kept; else every second, and the part of one past the last whole. */
    double duration = run->stopped_early ? (double)run->reported : opt->duration_s;
    uint32_t last = run->stopped_early ? run->reported - 1 : run->nseconds;
    uint32_t end_book = run->stopped_early ? run->reported : run->nseconds;

    hist_init(&lat);
    hist_init(&late);
    for (uint32_t i = 0; i < opt->threads; i++) {
        const struct worker *w = &ws[i];
        hist_merge(&lat, &w->tot.lat);
        hist_merge(&late, &w->tot.late);
        for (unsigned j = 0; j < GAP_BINS; j++)
            gaps[j] += w->gap_bins[j];
        for (uint32_t s = 0; s <= last; s++) {
            messages += w->per_sec[s];
            offered += w->offered_sec[s];
            if (w->pend[s] != NULL) {
                hist_merge(&lat, &w->pend[s]->lat);
                hist_merge(&late, &w->pend[s]->late);
            }
        }
        const struct books *b0 = &w->books[0], *b1 = &w->books[end_book];
        calls += b1->calls - b0->calls;
        syscalls += b1->syscalls - b0->syscalls;
        spin_ns += b1->spin_ns - b0->spin_ns;
        user += b1->user - b0->user;
        sys += b1->sys - b0->sys;
        if (wait >= 0 && b0->wait >= 0 && b1->wait >= 0)
            wait += b1->wait - b0->wait;
        else
            wait = -1.0;
        if (sleeps >= 0 && b0->sleeps >= 0 && b1->sleeps >= 0)
            sleeps += b1->sleeps - b0->sleeps;
        else
            sleeps = -1;
    }
    fprintf(f, "{\"ok\": true, \"mode\": \"%s\", \"rate\": ", open ? "open" : "closed");
    if (open)
        fprintf(f, "%.17g", opt->rate);
    else
        fputs("null", f);
    fprintf(f, ", \"connections\": %u, \"threads\": %u, \"msg_size\": %u", opt->connections, opt->threads,
            opt->msg_size);
    fprintf(f, ", \"throughput_msgs_per_s\": %.3f, \"messages\": %llu, \"duration_s\": %.17g",
            (double)messages / duration, (unsigned long long)messages, duration);
    /* Open loop, every echo counted is of an arrival offered, so served is messages. */
    if (open)
        fprintf(f, ", \"offered\": %llu, \"served\": %llu", (unsigned long long)offered,
                (unsigned long long)messages);
    else
        fputs(", \"offered\": null, \"served\": null", f);
    fputs(", \"per_second\": [", f);
    /* Under one second of measurement there is no whole second: report the rate over what there is. */
    double span = opt->duration_s < 1.0 ? opt->duration_s : 1.0;
    for (uint32_t s = 0; s < run->reported; s++) {
        uint64_t n = 0;
        for (uint32_t i = 0; i < opt->threads; i++)
            n += ws[i].per_sec[s];
        fprintf(f, "%s%.1f", s ? ", " : "", (double)n / span);
    }
    fputs("]", f);
    put_hist_us(f, "latency_us", &lat);
    if (open) {
        put_hist_us(f, "lateness_us", &late);
        fprintf(f, ", \"spin_s\": %.6f", (double)spin_ns / 1e9);
        fputs(", \"gap_bins\": [", f);
        for (unsigned j = 0; j < GAP_BINS; j++)
            fprintf(f, "%s%llu", j ? ", " : "", (unsigned long long)gaps[j]);
        fputs("]", f);
    } else {
        fputs(", \"lateness_us\": null, \"spin_s\": null, \"gap_bins\": null", f);
    }
    fprintf(f, ", \"cpu_s\": {\"user\": %.6f, \"sys\": %.6f}", user, sys);
    if (wait >= 0)
        fprintf(f, ", \"wait_s\": %.6f", wait);
    else
        fputs(", \"wait_s\": null", f);
    fprintf(f, ", \"notify_calls\": %llu, \"syscalls\": %llu", (unsigned long long)calls,
            (unsigned long long)syscalls);
    if (sleeps >= 0)
        fprintf(f, ", \"sleeps\": %ld", sleeps);
    else
        fputs(", \"sleeps\": null", f);
    fprintf(f, ", \"errors\": 0, \"stopped_early\": %s}\n", run->stopped_early ? "true" : "false");
}

static void put_failure(FILE *f, const char *reason)
{
    fputs("{\"ok\": false, \"error\": ", f);
    put_json_string(f, reason);
    fputs("}\n", f);
}

/* Writes through a temporary file and rename() so readers never see half a report. */
static int write_json(const char *path, const struct run *run, const struct worker *ws, const char *reason)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
        fprintf(stderr, PROG ": --json: path too long: %s\n", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    if (reason)
        put_failure(f, reason);
    else
        put_report(f, run, ws);
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", tmp, strerror(errno));
        fclose(f);
        unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---- setup ---- */

static int resolve(struct run *run)
{
    const struct options *opt = run->opt;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&run->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&run->addr;

    memset(&run->addr, 0, sizeof(run->addr));
    if (inet_pton(AF_INET, opt->host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(opt->port);
        run->addrlen = sizeof(*in4);
        return 0;
    }
    if (inet_pton(AF_INET6, opt->host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(opt->port);
        run->addrlen = sizeof(*in6);
        return 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(opt->host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        run_fail(run, "cannot resolve host '%s': %s", opt->host, rc ? gai_strerror(rc) : "no address");
        return -1;
    }
    /* Servers bind IPv4 by default, and "localhost" often lists ::1 first: prefer IPv4. */
    const struct addrinfo *pick = res;
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next)
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    memcpy(&run->addr, pick->ai_addr, pick->ai_addrlen);
    run->addrlen = pick->ai_addrlen;
    if (pick->ai_family == AF_INET6)
        in6->sin6_port = htons(opt->port);
    else
        in4->sin_port = htons(opt->port);
    freeaddrinfo(res);
    return 0;
}

/* Each connection is a descriptor; ask for the hard limit rather than fail at 1024. */
static int raise_fd_limit(struct run *run)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)run->opt->connections + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < need) {
            run_fail(run, "%u connections need %llu descriptors but the limit is %llu (raise ulimit -n)",
                     run->opt->connections, (unsigned long long)need, (unsigned long long)rl.rlim_cur);
            return -1;
        }
    }
    return 0;
}

static uint8_t *make_pattern(uint32_t msg_size)
{
    uint8_t *p = malloc((size_t)msg_size + PATTERN_PERIOD);
    if (p != NULL)
        for (size_t i = 0; i < (size_t)msg_size + PATTERN_PERIOD; i++)
            p[i] = (uint8_t)(i % PATTERN_PERIOD);
    return p;
}

static int setup_workers(struct run *run, struct worker *ws)
{
    const struct options *opt = run->opt;
    size_t rbuf = opt->msg_size < 65536 ? 65536 : opt->msg_size;
    if (rbuf > (1u << 20))
        rbuf = 1u << 20;
    for (uint32_t i = 0; i < opt->threads; i++) {
        struct worker *w = &ws[i];
        w->index = (int)i;
        w->run = run;
        w->ep = -1;
        /* Connection j belongs to thread j mod T. */
        w->nconns = opt->connections / opt->threads + (i < opt->connections % opt->threads ? 1 : 0);
        w->conns = calloc(w->nconns, sizeof(*w->conns));
        w->heap = calloc(w->nconns, sizeof(*w->heap));
        /* Per second measured, and one more for the part of a second past the last whole one. */
        w->per_sec = calloc(run->nseconds + 1, sizeof(*w->per_sec));
        w->offered_sec = calloc(run->nseconds + 1, sizeof(*w->offered_sec));
        w->pend = calloc(run->nseconds + 1, sizeof(*w->pend));
        w->books = calloc(run->nseconds + 1, sizeof(*w->books));
        w->rbuf = malloc(rbuf);
        w->rbuf_size = rbuf;
        if (!w->conns || !w->heap || !w->per_sec || !w->offered_sec || !w->pend || !w->books || !w->rbuf) {
            run_fail(run, "out of memory setting up thread %u", i);
            return -1;
        }
        hist_init(&w->tot.lat);
        hist_init(&w->tot.late);
        for (uint32_t k = 0; k < w->nconns; k++) {
            struct conn *c = &w->conns[k];
            c->fd = -1;
            c->id = i + k * opt->threads;
            c->heap_pos = UINT32_MAX;
            c->arr.rng = UINT64_C(0x9E3779B97F4A7C15) ^ ((uint64_t)c->id * UINT64_C(0xBF58476D1CE4E5B9) + 1);
            if (c->arr.rng == 0) /* xorshift's one fixed point */
                c->arr.rng = 1;
        }
        w->ep = SYSC(epoll_create1(EPOLL_CLOEXEC));
        if (w->ep < 0) {
            run_fail(run, "epoll_create1: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* --progress, in the main thread while the workers run: after each whole second of the measure phase
 * (and a little slack for completions being counted), print its throughput on stderr and seal it; on
 * SIGUSR1 (blocked in every thread, taken here by sigtimedwait) end the measure phase after the seconds
 * printed so far, at least one, by moving meas_end back to the end of the last of them: the report then
 * counts those seconds' requests only (the workers kept the rest apart, the books were sampled there),
 * and the run ends after the cool-down, counted from there but not before the signal (the requests
 * of those seconds echoed until then are served).  The workers see the new times within their tick. */
#define PROGRESS_SLACK_NS UINT64_C(20000000)
#define STOP_GUARD_NS UINT64_C(1000000) /* a signal this close to the measure phase's end changes nothing */

static void stop_early(struct run *run, uint32_t printed)
{
    uint32_t keep = printed < 1 ? 1 : printed;
    uint64_t now = now_ns();
    if (keep >= run->nseconds || now + STOP_GUARD_NS >= run->meas_end0)
        return;
    uint64_t meas_end = run->warm_end + (uint64_t)keep * UINT64_C(1000000000);
    uint64_t end = meas_end + (uint64_t)(run->opt->cooldown_s * 1e9);
    if (end < now + STOP_GUARD_NS)
        end = now + STOP_GUARD_NS;
    atomic_store(&run->end, end);
    atomic_store(&run->meas_end, meas_end);
    run->reported = keep;
    run->stopped_early = 1;
}

static void progress(struct run *run, const struct worker *ws, const sigset_t *usr1)
{
    const struct options *opt = run->opt;
    double span = opt->duration_s < 1.0 ? opt->duration_s : 1.0;
    uint32_t printed = 0;
    while (printed < run->nseconds && !atomic_load(&run->failed) && !run->stopped_early) {
        uint64_t due = run->warm_end + (uint64_t)(printed + 1) * UINT64_C(1000000000) + PROGRESS_SLACK_NS;
        uint64_t now = now_ns();
        if (now < due) {
            uint64_t wait = due - now;
            if (wait > UINT64_C(100000000))
                wait = UINT64_C(100000000); /* poll the failure flag meanwhile */
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};
            if (SYSC(sigtimedwait(usr1, NULL, &ts)) == SIGUSR1)
                stop_early(run, printed); /* keeps the seconds the signal was sent on */
            continue;
        }
        uint64_t n = 0;
        for (uint32_t i = 0; i < opt->threads; i++)
            n += __atomic_load_n(&ws[i].per_sec[printed], __ATOMIC_RELAXED);
        printed++;
        atomic_store_explicit(&run->sealed, printed, memory_order_relaxed);
        fprintf(stderr, "{\"event\": \"second\", \"second\": %u, \"msgs_per_s\": %.1f}\n", printed,
                (double)n / span);
        fflush(stderr);
    }
}

/* --phase-events, in the main thread: sleep (in steps that look at the failure flag) until `until` moves
 * past, then say so on stderr.  t_ns is the boundary's own time, so a reader can tell how late it read. */
static void sleep_until(struct run *run, const _Atomic uint64_t *until)
{
    for (;;) {
        uint64_t now = now_ns(), due = atomic_load(until);
        if (now >= due || atomic_load(&run->failed))
            return;
        uint64_t wait = due - now < UINT64_C(100000000) ? due - now : UINT64_C(100000000);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)wait};
        SYSC(nanosleep(&ts, NULL));
    }
}

static void phase_event(const struct run *run, const char *phase, uint64_t t)
{
    if (atomic_load(&run->failed))
        return;
    /* Every thread's system calls so far (sysc.h): the live ones by kernel thread id, and the total,
     * which keeps the calls of threads that have ended. */
    char *line = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&line, &len); /* the event in one write: no other line inside it */
    if (out == NULL) {
        fprintf(stderr,
                "{\"event\": \"phase\", \"phase\": \"%s\", \"t_ns\": %llu, \"threads\": [], "
                "\"syscalls\": %llu}\n",
                phase, (unsigned long long)t, (unsigned long long)sysc_total());
        fflush(stderr);
        return;
    }
    fprintf(out, "{\"event\": \"phase\", \"phase\": \"%s\", \"t_ns\": %llu, \"threads\": [", phase,
            (unsigned long long)t);
    uint64_t total = sysc_write_live(out);
    fprintf(out, "], \"syscalls\": %llu}\n", (unsigned long long)total);
    fclose(out);
    fwrite(line, 1, len, stderr);
    fflush(stderr);
    free(line);
}

static void free_workers(struct worker *ws, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct worker *w = &ws[i];
        for (uint32_t k = 0; w->conns && k < w->nconns; k++)
            if (w->conns[k].fd >= 0)
                close(w->conns[k].fd);
        if (w->ep >= 0)
            close(w->ep);
        free(w->conns);
        free(w->heap);
        for (uint32_t s = 0; w->pend && s <= w->run->nseconds; s++)
            free(w->pend[s]);
        free(w->per_sec);
        free(w->offered_sec);
        free(w->pend);
        free(w->books);
        free(w->rbuf);
    }
    free(ws);
}

int main(int argc, char **argv)
{
    static struct options opt;
    static struct run run;
    struct worker *ws = NULL;
    sysc_register();
    uint32_t started = 0;
    int rc = 1;

    parse_options(argc, argv, &opt);
    run.opt = &opt;
    pthread_mutex_init(&run.reason_lock, NULL);
    run.nseconds = opt.duration_s < 1.0 ? 1 : (uint32_t)opt.duration_s;
    run.reported = run.nseconds;
    /* An early stop keeps at least the first second; without --progress there is none. */
    atomic_store(&run.sealed, opt.progress ? 1u : UINT32_MAX);
    if (opt.rate > 0)
        run.mean_gap_ns = (double)opt.connections * 1e9 / opt.rate;
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    if (opt.progress) /* before the workers start: they inherit the mask, so only sigtimedwait takes it */
        pthread_sigmask(SIG_BLOCK, &usr1, NULL);

    if (raise_fd_limit(&run) < 0 || resolve(&run) < 0)
        goto out;
    run.pattern = make_pattern(opt.msg_size);
    ws = calloc(opt.threads, sizeof(*ws));
    if (run.pattern == NULL || ws == NULL) {
        run_fail(&run, "out of memory");
        goto out;
    }
    if (setup_workers(&run, ws) < 0)
        goto out;

    pthread_barrier_init(&run.connected, NULL, opt.threads + 1);
    pthread_barrier_init(&run.started, NULL, opt.threads + 1);
    for (; started < opt.threads; started++) {
        int err = pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]);
        if (err != 0) {
            /* The barriers count every thread: without them all, no one could pass. */
            fprintf(stderr, PROG ": cannot start thread %u: %s\n", started, strerror(err));
            exit(1);
        }
    }
    pthread_barrier_wait(&run.connected);
    /* Phases are fixed once every connection is up, so all threads share one clock. */
    run.t0 = now_ns();
    run.warm_end = run.t0 + (uint64_t)(opt.warmup_s * 1e9);
    run.meas_end0 = run.warm_end + (uint64_t)(opt.duration_s * 1e9);
    atomic_store(&run.meas_end, run.meas_end0);
    atomic_store(&run.end, run.meas_end0 + (uint64_t)(opt.cooldown_s * 1e9));
    pthread_barrier_wait(&run.started);
    if (opt.phase_events) {
        _Atomic uint64_t warm_end = run.warm_end;
        sleep_until(&run, &warm_end);
        phase_event(&run, "measure", run.warm_end);
    }
    if (opt.progress)
        progress(&run, ws, &usr1);
    if (opt.phase_events) {
        sleep_until(&run, &run.meas_end); /* an early stop moved it back: at once */
        phase_event(&run, "cooldown", atomic_load(&run.meas_end));
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(ws[i].tid, NULL);
    pthread_barrier_destroy(&run.connected);
    pthread_barrier_destroy(&run.started);
    if (!atomic_load(&run.failed))
        rc = 0;

out:
    if (rc == 0) {
        if (opt.json_path) {
            if (write_json(opt.json_path, &run, ws, NULL) < 0)
                rc = 1;
        } else {
            put_report(stdout, &run, ws);
            if (fflush(stdout) != 0)
                rc = 1;
        }
    } else {
        fprintf(stderr, PROG ": %s\n", run.reason);
        if (opt.json_path)
            write_json(opt.json_path, &run, ws, run.reason);
    }
    if (ws)
        free_workers(ws, opt.threads);
    free((void *)run.pattern);
    return rc;
}
