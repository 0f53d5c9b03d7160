/* main.c -- demux-server: flags, the listening socket, thread bookkeeping,
 * signal-driven shutdown and the exit JSON (docs/CONTRACTS.md §1). */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#ifndef DEMUX_BUILD_INFO
#define DEMUX_BUILD_INFO "source=unknown compiler=unknown flags=unknown"
#endif

#define MAX_SLOTS DEMUX_MAX_SLOTS

struct server srv;
atomic_bool g_stop;
_Thread_local struct tstat *cur_ts;

const char *const op_names[OP_COUNT] = {"notify", "lock", "queue_put", "queue_get", "promote",
                                        "recv",   "rearm", "work",     "send",      "accept"};

static const struct pattern_ops *const patterns[] = {
    &pattern_reactor, &pattern_hsha,    &pattern_lf,           &pattern_tpc,
    &pattern_proactor, &pattern_uring, &pattern_multireactor,
};
#define NPATTERNS (sizeof(patterns) / sizeof(patterns[0]))

static const char *const notifier_names[] = {"select", "poll", "epoll-lt", "epoll-et", "uring", "none"};
#define NNOTIFIERS (sizeof(notifier_names) / sizeof(notifier_names[0]))

_Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("demux-server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* Bad input: one line, exit status 2. */
_Noreturn static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("demux-server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

const struct notifier_ops *notifier_by_name(const char *name)
{
    static const struct notifier_ops *const all[] = {&notifier_select, &notifier_poll, &notifier_epoll_lt,
                                                     &notifier_epoll_et, &notifier_uring};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}

static bool pair_valid(const struct pattern_ops *p, const char *notifier)
{
    for (const char *const *n = p->notifiers; *n != NULL; n++)
        if (strcmp(*n, notifier) == 0)
            return true;
    return false;
}

static void print_list(void)
{
    bool first = true;
    putchar('[');
    for (size_t i = 0; i < NPATTERNS; i++)
        for (const char *const *n = patterns[i]->notifiers; *n != NULL; n++) {
            printf("%s{\"pattern\": \"%s\", \"notifier\": \"%s\", \"min_threads\": %d, \"max_threads\": %d}",
                   first ? "" : ", ", patterns[i]->name, *n, patterns[i]->min_threads,
                   patterns[i]->max_threads);
            first = false;
        }
    puts("]");
}

static void print_help(void)
{
    puts("usage: demux-server --pattern P --notifier N --threads T --port PORT [--bind ADDR]\n"
         "                    [--work-us W] [--msg-size B] [--instrument] [--cpus LIST] [--max-conns N]\n"
         "       demux-server --list | --version | --help\n"
         "Echo server: reads B-byte messages, spins W us per message, echoes them back.\n"
         "--list prints the valid (pattern, notifier) pairs and their thread ranges as JSON.\n"
         "On SIGTERM/SIGINT it stops, joins every thread and prints one exit JSON line.");
}

/* ---- threads --------------------------------------------------------- */

static void *thread_main(void *arg)
{
    struct thr *t = arg;
    cur_ts = &t->st;
    if (t->cpu >= 0 && pin_self_to_cpu(t->cpu) < 0)
        die("cannot pin thread %d to CPU %d: %s", t->index, t->cpu, strerror(errno));
    t->fn(t->arg);
    thread_cpu_times(&t->st.user_s, &t->st.sys_s);
    atomic_store(&t->done, true);
    return NULL;
}

struct thr *thr_reserve(struct server *s, const char *role)
{
    if (s->nthr >= (int)(sizeof(s->thr) / sizeof(s->thr[0])))
        die("too many threads (%d)", s->nthr + 1);
    struct thr *t = &s->thr[s->nthr];
    t->index = s->nthr;
    t->cpu = s->ncpus > 0 ? s->cpus[t->index % s->ncpus] : -1;
    t->role = role;
    if (s->instrument && (t->st.in = tinstr_new()) == NULL)
        die("out of memory for instrumentation");
    s->nthr++;
    return t;
}

int spawn(struct server *s, const char *role, void *(*fn)(void *), void *arg)
{
    struct thr *t = thr_reserve(s, role);
    t->fn = fn;
    t->arg = arg;
    int rc = pthread_create(&t->tid, NULL, thread_main, t);
    if (rc != 0)
        die("cannot create thread %d: %s", t->index, strerror(rc));
    t->started = true;
    return t->index;
}

struct tinstr *tinstr_new(void)
{
    struct tinstr *in = calloc(1, sizeof(*in));
    if (in == NULL)
        return NULL;
    for (int i = 0; i < OP_COUNT; i++)
        hist_init(&in->ops[i]);
    return in;
}

static void tinstr_merge(struct tinstr *dst, const struct tinstr *src)
{
    for (int o = 0; o < OP_COUNT; o++)
        hist_merge(&dst->ops[o], &src->ops[o]);
    dst->calls += src->calls;
    dst->events += src->events;
    if (src->events_max > dst->events_max)
        dst->events_max = src->events_max;
    for (int b = 0; b <= MAX_EVENTS; b++) {
        dst->by_events_n[b] += src->by_events_n[b];
        dst->by_events_ns[b] += src->by_events_ns[b];
    }
}

void tstat_merge(struct tstat *dst, const struct tstat *src)
{
    dst->messages += src->messages;
    dst->accepted += src->accepted;
    dst->closed += src->closed;
    dst->user_s += src->user_s;
    dst->sys_s += src->sys_s;
    if (dst->in != NULL && src->in != NULL)
        tinstr_merge(dst->in, src->in);
}

void instr_notify(uint64_t t0, int nevents)
{
    struct tinstr *in = cur_ts->in;
    if (in == NULL)
        return;
    uint64_t dt = now_ns() - t0;
    hist_add(&in->ops[OP_NOTIFY], dt);
    in->calls++;
    in->events += (uint64_t)nevents;
    if ((uint64_t)nevents > in->events_max)
        in->events_max = (uint64_t)nevents;
    if (nevents > 0) {
        int b = nevents > MAX_EVENTS ? MAX_EVENTS : nevents;
        in->by_events_n[b]++;
        in->by_events_ns[b] += dt;
    }
}

/* ---- setup ----------------------------------------------------------- */

static void parse_args(int argc, char **argv)
{
    enum { O_PATTERN = 256, O_NOTIFIER, O_THREADS, O_PORT, O_BIND, O_WORK, O_MSG, O_INSTR, O_CPUS, O_MAXC,
           O_LIST, O_VERSION, O_HELP };
    static const struct option opts[] = {
        {"pattern", required_argument, NULL, O_PATTERN}, {"notifier", required_argument, NULL, O_NOTIFIER},
        {"threads", required_argument, NULL, O_THREADS}, {"port", required_argument, NULL, O_PORT},
        {"bind", required_argument, NULL, O_BIND},       {"work-us", required_argument, NULL, O_WORK},
        {"msg-size", required_argument, NULL, O_MSG},    {"instrument", no_argument, NULL, O_INSTR},
        {"cpus", required_argument, NULL, O_CPUS},       {"max-conns", required_argument, NULL, O_MAXC},
        {"list", no_argument, NULL, O_LIST},             {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, O_HELP},             {NULL, 0, NULL, 0},
    };
    const char *pattern = NULL, *threads = NULL, *port = NULL;
    uint64_t v;
    struct server *s = &srv;
    s->msg_size = 1;
    s->bind_addr = "0.0.0.0";
    s->max_conns = -1;
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
            s->notifier_name = optarg;
            break;
        case O_THREADS:
            threads = optarg;
            break;
        case O_PORT:
            port = optarg;
            break;
        case O_BIND:
            s->bind_addr = optarg;
            break;
        case O_WORK:
            if (parse_double(optarg, 0, DEMUX_MAX_WORK_US, &s->work_us) < 0)
                usage_error("bad --work-us '%s' (a number of microseconds, 0..1000000)", optarg);
            break;
        case O_MSG:
            if (parse_u64(optarg, 1, MAX_MSG_SIZE, &v) < 0)
                usage_error("bad --msg-size '%s' (bytes, 1..%u)", optarg, MAX_MSG_SIZE);
            s->msg_size = (uint32_t)v;
            break;
        case O_INSTR:
            s->instrument = true;
            break;
        case O_CPUS:
            s->ncpus = parse_cpu_list(optarg, s->cpus, MAX_CPUS);
            if (s->ncpus <= 0)
                usage_error("bad --cpus '%s' (a CPU list such as 0-3,8)", optarg);
            break;
        case O_MAXC:
            if (parse_u64(optarg, 1, MAX_SLOTS, &v) < 0)
                usage_error("bad --max-conns '%s' (1..%d)", optarg, MAX_SLOTS);
            s->max_conns = (int)v;
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
    if (s->notifier_name == NULL)
        usage_error("missing --notifier (see --list)");
    if (threads == NULL)
        usage_error("missing --threads");
    if (port == NULL)
        usage_error("missing --port");
    for (size_t i = 0; i < NPATTERNS; i++)
        if (strcmp(patterns[i]->name, pattern) == 0)
            s->pattern = patterns[i];
    if (s->pattern == NULL)
        usage_error("unknown pattern '%s' (one of reactor hsha lf tpc proactor uring multireactor)", pattern);
    bool known = false;
    for (size_t i = 0; i < NNOTIFIERS; i++)
        known = known || strcmp(notifier_names[i], s->notifier_name) == 0;
    if (!known)
        usage_error("unknown notifier '%s' (one of select poll epoll-lt epoll-et uring none)",
                    s->notifier_name);
    if (!pair_valid(s->pattern, s->notifier_name))
        usage_error("invalid pair: pattern '%s' does not work with notifier '%s' (see --list)", pattern,
                    s->notifier_name);
    s->nops = notifier_by_name(s->notifier_name);
    const struct pattern_ops *p = s->pattern;
    if (parse_u64(threads, (uint64_t)p->min_threads, (uint64_t)p->max_threads, &v) < 0)
        usage_error("bad --threads '%s' for pattern '%s' (%d..%d)", threads, pattern, p->min_threads,
                    p->max_threads);
    s->threads = (int)v;
    if (parse_u64(port, 0, 65535, &v) < 0)
        usage_error("bad --port '%s' (0..65535)", port);
    s->port = (int)v;
}

static void open_listener(struct server *s)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, s->bind_addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)s->port);
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, s->bind_addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)s->port);
        len = sizeof(*a6);
    } else {
        usage_error("bad --bind '%s' (a numeric IPv4 or IPv6 address)", s->bind_addr);
    }
    /* Every pattern (tpc's acceptor too) accepts until EAGAIN. */
    s->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->lfd < 0)
        die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s->lfd, (struct sockaddr *)&ss, len) < 0)
        die("cannot bind %s port %d: %s", s->bind_addr, s->port, strerror(errno));
    if (listen(s->lfd, 4096) < 0)
        die("listen: %s", strerror(errno));
    len = sizeof(ss);
    if (getsockname(s->lfd, (struct sockaddr *)&ss, &len) < 0)
        die("getsockname: %s", strerror(errno));
    s->port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
}

/* The connection table is indexed by descriptor, so it spans the descriptor
 * limit (raised to the hard limit first). */
static void size_tables(struct server *s)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max > MAX_SLOTS ? MAX_SLOTS : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        die("getrlimit: %s", strerror(errno));
    s->nslots = rl.rlim_cur > MAX_SLOTS ? MAX_SLOTS : (int)rl.rlim_cur;
    if (s->max_conns < 0 || s->max_conns > s->nslots)
        s->max_conns = s->nslots;
    s->conns = calloc((size_t)s->nslots, sizeof(*s->conns));
    if (s->conns == NULL)
        die("out of memory for %d connection slots", s->nslots);
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* ---- exit JSON ------------------------------------------------------- */

static void print_hist(const char *name, const struct hist *h, bool *first)
{
    if (hist_count(h) == 0)
        return;
    printf("%s\"%s\": {\"count\": %" PRIu64 ", \"total_ns\": %" PRIu64 ", \"mean_ns\": %.1f, \"p50_ns\": %" PRIu64
           ", \"p90_ns\": %" PRIu64 ", \"p99_ns\": %" PRIu64 ", \"p999_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64
           "}",
           *first ? "" : ", ", name, hist_count(h), hist_total(h), hist_mean(h), hist_percentile(h, 50),
           hist_percentile(h, 90), hist_percentile(h, 99), hist_percentile(h, 99.9), hist_max(h));
    *first = false;
}

static void print_exit(struct server *s, double elapsed)
{
    uint64_t messages = 0, accepted = 0, closed = 0;
    for (int i = 0; i < s->nthr; i++) {
        messages += s->thr[i].st.messages;
        accepted += s->thr[i].st.accepted;
        closed += s->thr[i].st.closed;
    }
    closed += s->main_closed;
    double user, sys;
    cpu_times(&user, &sys);
    printf("{\"event\": \"exit\", \"pattern\": \"%s\", \"notifier\": \"%s\", \"threads\": %d, "
           "\"work_us\": %.3f, \"msg_size\": %u, \"instrument\": %s, \"messages\": %" PRIu64
           ", \"connections_accepted\": %" PRIu64 ", \"connections_closed\": %" PRIu64 ", \"elapsed_s\": %.6f, "
           "\"cpu_s\": {\"user\": %.6f, \"sys\": %.6f}, \"threads_detail\": [",
           s->pattern->name, s->notifier_name, s->threads, s->work_us, s->msg_size,
           s->instrument ? "true" : "false", messages, accepted, closed, elapsed, user, sys);
    for (int i = 0; i < s->nthr; i++) {
        struct thr *t = &s->thr[i];
        char cpu[16];
        if (t->cpu >= 0)
            snprintf(cpu, sizeof(cpu), "%d", t->cpu);
        else
            strcpy(cpu, "null");
        printf("%s{\"index\": %d, \"role\": \"%s\", \"cpu\": %s, \"messages\": %" PRIu64
               ", \"cpu_s\": {\"user\": %.6f, \"sys\": %.6f}}",
               i ? ", " : "", t->index, t->role, cpu, t->st.messages, t->st.user_s, t->st.sys_s);
    }
    printf("], \"ops\": {");
    if (s->instrument) {
        struct tinstr *sum = tinstr_new();
        if (sum == NULL)
            die("out of memory");
        for (int i = 0; i < s->nthr; i++)
            tinstr_merge(sum, s->thr[i].st.in);
        bool first = true;
        for (int o = 0; o < OP_COUNT; o++)
            print_hist(op_names[o], &sum->ops[o], &first);
        printf("}, \"events_per_call\": {\"calls\": %" PRIu64 ", \"mean\": %.4f, \"max\": %" PRIu64
               "}, \"notify_by_events\": [",
               sum->calls, sum->calls ? (double)sum->events / (double)sum->calls : 0.0, sum->events_max);
        first = true;
        for (int b = 1; b <= MAX_EVENTS; b++) {
            if (sum->by_events_n[b] == 0)
                continue;
            printf("%s{\"events\": %d, \"count\": %" PRIu64 ", \"mean_ns\": %.1f}", first ? "" : ", ", b,
                   sum->by_events_n[b], (double)sum->by_events_ns[b] / (double)sum->by_events_n[b]);
            first = false;
        }
        printf("]}\n");
        free(sum);
    } else {
        printf("}}\n");
    }
    fflush(stdout);
}

/* ---- main ------------------------------------------------------------ */

int main(int argc, char **argv)
{
    struct server *s = &srv;
    parse_args(argc, argv);

    /* Only main takes SIGTERM/SIGINT (sigwait); the pattern threads inherit the
     * mask. */
    sigset_t stopset;
    sigemptyset(&stopset);
    sigaddset(&stopset, SIGTERM);
    sigaddset(&stopset, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stopset, NULL);
    signal(SIGPIPE, SIG_IGN);

    size_tables(s);
    open_listener(s);
    cur_ts = &s->main_ts;
    if (s->pattern->start(s) < 0)
        die("cannot start pattern '%s' with notifier '%s': %s", s->pattern->name, s->notifier_name,
            strerror(errno));
    uint64_t t0 = now_ns();
    printf("{\"event\": \"listening\", \"port\": %d}\n", s->port);
    fflush(stdout);

    int sig;
    while (sigwait(&stopset, &sig) != 0) {
    }
    atomic_store(&g_stop, true);
    s->pattern->wake_all(s);
    for (int i = 0; i < s->nthr; i++)
        if (s->thr[i].started)
            pthread_join(s->thr[i].tid, NULL);
    double elapsed = (double)(now_ns() - t0) / 1e9;

    /* Connections still open at shutdown are closed here and counted. */
    for (int fd = 0; fd < s->nslots; fd++) {
        struct conn *c = &s->conns[fd];
        if (atomic_load(&c->live)) {
            c->nt = NULL;
            conn_close(s, c);
        }
    }
    s->main_closed = s->main_ts.closed;
    if (s->pattern->cleanup != NULL)
        s->pattern->cleanup(s);
    print_exit(s, elapsed);
    close(s->lfd);
    for (int fd = 0; fd < s->nslots; fd++)
        free(s->conns[fd].buf);
    free(s->conns);
    for (int i = 0; i < s->nthr; i++)
        free(s->thr[i].st.in);
    return 0;
}
