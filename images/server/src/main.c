/* main.c -- demux-server: the listening socket, thread bookkeeping,
 * signal-driven shutdown and the exit JSON (docs/CONTRACTS.md §1); the flags
 * are config.c's. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

/* ---- threads --------------------------------------------------------- */

static void *thread_main(void *arg)
{
    struct thr *t = arg;
    instr_bind(&t->st);
    if (t->cpu >= 0 && pin_self_to_cpu(t->cpu) < 0)
        die("cannot pin thread %d to CPU %d: %s", t->index, t->cpu, strerror(errno));
    t->fn(t->arg);
    tstat_close(&t->st);
    return NULL;
}

struct thr *thr_reserve(struct server *s, const char *role)
{
    if (s->nthr >= (int)(sizeof(s->thr) / sizeof(s->thr[0])))
        die("too many threads (%d)", s->nthr + 1);
    struct thr *t = &s->thr[s->nthr];
    t->index = s->nthr;
    t->cpu = s->cfg.ncpus > 0 ? s->cfg.cpus[t->index % s->cfg.ncpus] : -1;
    t->role = role;
    if (s->cfg.instrument && (t->st.in = tinstr_new()) == NULL)
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

/* ---- setup ----------------------------------------------------------- */

static void open_listener(struct server *s)
{
    struct config *cfg = &s->cfg;
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, cfg->bind_addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, cfg->bind_addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        len = sizeof(*a6);
    } else {
        usage_error("bad --bind '%s' (a numeric IPv4 or IPv6 address)", cfg->bind_addr);
    }
    /* Every pattern (tpc's acceptor too) accepts until EAGAIN. */
    int lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0)
        die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&ss, len) < 0)
        die("cannot bind %s port %d: %s", cfg->bind_addr, cfg->port, strerror(errno));
    if (listen(lfd, 4096) < 0)
        die("listen: %s", strerror(errno));
    len = sizeof(ss);
    if (getsockname(lfd, (struct sockaddr *)&ss, &len) < 0)
        die("getsockname: %s", strerror(errno));
    cfg->port = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    s->ct.lfd = lfd;
}

/* The connection table is indexed by descriptor, so it spans the descriptor
 * limit (raised to the hard limit first). */
static void size_tables(struct server *s)
{
    struct conn_table *t = &s->ct;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max > MAX_SLOTS ? MAX_SLOTS : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        die("getrlimit: %s", strerror(errno));
    /* Tests: size everything as if the limit were N (a host's 1,048,576 where
     * this one's cannot be raised); descriptors stay below the real limit. */
    const char *as = getenv("DEMUX_NOFILE");
    uint64_t v;
    if (as != NULL) {
        if (parse_u64(as, 1, MAX_SLOTS, &v) < 0)
            usage_error("bad DEMUX_NOFILE '%s' (a descriptor limit, 1..%d)", as, MAX_SLOTS);
        rl.rlim_cur = v;
    }
    t->cfg = &s->cfg;
    t->nslots = rl.rlim_cur > MAX_SLOTS ? MAX_SLOTS : (int)rl.rlim_cur;
    t->max_conns = s->cfg.max_conns;
    if (t->max_conns < 0 || t->max_conns > t->nslots)
        t->max_conns = t->nslots;
    t->slots = calloc((size_t)t->nslots, sizeof(*t->slots));
    if (t->slots == NULL)
        die("out of memory for %d connection slots", t->nslots);
    pthread_mutex_init(&t->park_lock, NULL);
    t->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
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

static void print_exit(struct server *s, double elapsed, const char *extra)
{
    uint64_t messages = 0, accepted = 0, closed = 0, stalled = 0;
    for (int i = 0; i < s->nthr; i++) {
        messages += s->thr[i].st.messages;
        accepted += s->thr[i].st.accepted;
        closed += s->thr[i].st.closed;
        stalled += s->thr[i].st.stalled;
    }
    closed += s->main_closed;
    double user, sys;
    cpu_times(&user, &sys);
    char wake[16] = "null";
    if (s->cfg.pattern->queued)
        snprintf(wake, sizeof(wake), "\"%s\"", wake_names[s->cfg.wake]);
    printf("{\"event\": \"exit\", \"pattern\": \"%s\", \"notifier\": \"%s\", \"threads\": %d, "
           "\"work_us\": %.3f, \"work_clock\": \"on_cpu\", \"wake\": %s, \"stall_ms\": %d, "
           "\"msg_size\": %u, \"instrument\": %s, \"messages\": %" PRIu64
           ", \"connections_accepted\": %" PRIu64 ", \"connections_closed\": %" PRIu64 ", \"connections_stalled\": %" PRIu64 ", \"elapsed_s\": %.6f, "
           "\"cpu_s\": {\"user\": %.6f, \"sys\": %.6f}, \"syscalls\": %" PRIu64 ", \"threads_detail\": [",
           s->cfg.pattern->name, s->cfg.notifier_name, s->cfg.threads, s->cfg.work_us, wake, s->cfg.stall_ms,
           s->cfg.msg_size, s->cfg.instrument ? "true" : "false", messages, accepted, closed, stalled, elapsed, user,
           sys, sysc_total());
    for (int i = 0; i < s->nthr; i++) {
        struct thr *t = &s->thr[i];
        char cpu[16];
        if (t->cpu >= 0)
            snprintf(cpu, sizeof(cpu), "%d", t->cpu);
        else
            strcpy(cpu, "null");
        printf("%s{\"index\": %d, \"role\": \"%s\", \"cpu\": %s, \"messages\": %" PRIu64
               ", \"cpu_s\": {\"user\": %.6f, \"sys\": %.6f}, \"syscalls\": %" PRIu64,
               i ? ", " : "", t->index, t->role, cpu, t->st.messages, t->st.user_s, t->st.sys_s, t->st.syscalls);
        if (t->st.in != NULL) { /* per thread: seconds waiting vs in the notifier, and who did what */
            printf(", \"idle_s\": %.6f, \"notify_s\": %.6f", (double)hist_total(&t->st.in->ops[OP_IDLE]) / 1e9,
                   (double)hist_total(&t->st.in->ops[OP_NOTIFY]) / 1e9);
            printf(", \"op_counts\": {");
            bool first = true;
            for (int o = 0; o < OP_COUNT; o++) {
                uint64_t n = hist_count(&t->st.in->ops[o]);
                if (n == 0)
                    continue;
                printf("%s\"%s\": %" PRIu64, first ? "" : ", ", op_names[o], n);
                first = false;
            }
            putchar('}');
        }
        /* Instrumented or not (read once, at the thread's end): its wait for a CPU and its sleeps, so a
         * plain run's threads can be held against its instrumented twin's (docs/ctmc-reference.md). */
        if (t->st.wait_s >= 0)
            printf(", \"wait_s\": %.6f", t->st.wait_s);
        else
            printf(", \"wait_s\": null");
        if (t->st.sleeps >= 0)
            printf(", \"sleeps\": %ld", t->st.sleeps);
        else
            printf(", \"sleeps\": null");
        putchar('}');
    }
    printf("]%s, \"ops\": {", extra);
    if (s->cfg.instrument) {
        struct tinstr *sum = tinstr_new();
        if (sum == NULL)
            die("out of memory");
        for (int i = 0; i < s->nthr; i++)
            tinstr_merge(sum, s->thr[i].st.in);
        bool first = true;
        for (int o = 0; o < OP_COUNT; o++)
            print_hist(op_names[o], &sum->ops[o], &first);
        printf("}, \"events_per_call\": {\"calls\": %" PRIu64 ", \"mean\": %.4f, \"max\": %" PRIu64
               ", \"cache\": %d}, \"notify_by_events\": [",
               sum->calls, sum->calls ? (double)sum->events / (double)sum->calls : 0.0, sum->events_max,
               MAX_EVENTS);
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

/* SIGUSR1: every thread's system calls so far, as one line on stdout (CONTRACTS.md §1): the launcher
 * asks at the client's phase boundaries and takes the difference. The total holds the threads that have
 * ended; the list, the live ones by kernel thread id (main's own among them). */
static void print_syscalls(void)
{
    printf("{\"event\": \"syscalls\", \"t_ns\": %" PRIu64 ", \"threads\": [", now_ns());
    uint64_t total = sysc_write_live(stdout);
    printf("], \"total\": %" PRIu64 "}\n", total);
    fflush(stdout);
}

/* ---- main ------------------------------------------------------------ */

int main(int argc, char **argv)
{
    static struct server srv; /* large (a slot per possible thread): not on the stack */
    struct server *s = &srv;
    sysc_register();
    config_parse(&s->cfg, argc, argv);

    /* Only main takes SIGTERM/SIGINT and SIGUSR1 (sigwait); the pattern threads
     * inherit the mask. */
    sigset_t stopset;
    sigemptyset(&stopset);
    sigaddset(&stopset, SIGTERM);
    sigaddset(&stopset, SIGINT);
    sigaddset(&stopset, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &stopset, NULL);
    signal(SIGPIPE, SIG_IGN);

    size_tables(s);
    open_listener(s);
    instr_bind(&s->main_ts);
    const struct pattern_ops *p = s->cfg.pattern;
    if (p->start(s) < 0)
        die("cannot start pattern '%s' with notifier '%s': %s", p->name, s->cfg.notifier_name,
            strerror(errno));
    uint64_t t0 = now_ns();
    printf("{\"event\": \"listening\", \"port\": %d}\n", s->cfg.port);
    fflush(stdout);

    /* Between signals main is the stall sweep (conns_sweep): it wakes at the next parked connection's
     * deadline, and at least every --stall-ms, which is soon enough for any connection parked meanwhile
     * (its deadline is --stall-ms after its park). */
    for (;;) {
        uint64_t next = conns_sweep(&s->ct);
        struct timespec ts = {.tv_sec = (time_t)(next / 1000000000u), .tv_nsec = (long)(next % 1000000000u)};
        int sig = SYSC(sigtimedwait(&stopset, NULL, &ts));
        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (sig == SIGUSR1)
            print_syscalls();
    }
    atomic_store(&s->ct.stop, true);
    p->wake_all(s);
    for (int i = 0; i < s->nthr; i++)
        if (s->thr[i].started)
            pthread_join(s->thr[i].tid, NULL);
    double elapsed = (double)(now_ns() - t0) / 1e9;

    /* Connections still open at shutdown are closed here and counted. */
    struct conn_table *t = &s->ct;
    for (int fd = 0; fd < t->nslots; fd++) {
        struct conn *c = conn_at(t, fd);
        if (atomic_load(&c->live)) {
            c->nt = NULL;
            conn_close(t, c);
        }
    }
    s->main_closed = s->main_ts.closed;
    char *extra = NULL;
    size_t extra_len = 0;
    if (p->describe != NULL) {
        FILE *f = open_memstream(&extra, &extra_len);
        if (f == NULL)
            die("out of memory");
        p->describe(s, f);
        fclose(f);
    }
    if (p->cleanup != NULL)
        p->cleanup(s);
    print_exit(s, elapsed, extra != NULL ? extra : "");
    free(extra);
    close(t->lfd);
    for (int fd = 0; fd < t->nslots; fd++)
        free(t->slots[fd].buf);
    free(t->slots);
    for (int i = 0; i < s->nthr; i++)
        free(s->thr[i].st.in);
    return 0;
}
