/* notify_scale.c -- cost of one notifier call against the number of watched
 * descriptors, with only a few of them ready (seed 004), measured on
 * demux-server's own notifier back-ends (server/src/notify_*.c, linked in
 * through notifier.h alone: no server code comes with them).
 *
 *   notify-scale --notifier select|poll|epoll-lt|epoll-et|uring --fds N --active A [--iters K] [--cpu C]
 *   (--notifier: any back-end of notifier.h's NOTIFIER_TABLE; the usage names them)
 *
 * Watches N eventfds; A of them hold a count and so stay readable (nothing
 * consumes it), the rest stay idle.  One "call" is one server round of the
 * back-end: a non-blocking wait() that returns the ready descriptors, and a
 * rearm() of each (select, poll: a bit or entry set under the interest-set
 * lock; epoll-lt: EPOLL_CTL_MOD; uring: a one-shot poll submitted; epoll-et:
 * nothing).  Edge-triggered epoll reports a descriptor once per arrival, so
 * after each call the reported eventfds are written to again, outside the
 * timed part.  Prints one JSON line:
 *   {"notifier": "poll", "fds": N, "active": A, "iters": K, "us_per_call": x, "ready_per_call": A}
 *
 * select and poll rescan every descriptor per call; epoll and io_uring keep the
 * interest set in the kernel, so their cost should follow A, not N. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include "notifier.h"
#include "util.h"

struct ctx {
    const char *name;
    const struct notifier_ops *ops;
    struct notifier *nt;
    int nfds, active, iters;
    int *fds;
};

static void die(const char *what)
{
    fprintf(stderr, "notify-scale: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* The back-ends' names, "a|b|c" (sep "|") or "a, b or c" (sep ", "), from the notifier table. */
static const char *backend_names(const char *sep)
{
    static char buf[2][256];
    char *out = buf[sep[0] == '|'];
    size_t off = 0;
    int last = 0;
    for (int i = 0; i < NOTIFIER_COUNT; i++)
        if (notifier_kinds[i].ops != NULL)
            last = i;
    for (int i = 0, k = 0; i < NOTIFIER_COUNT; i++) {
        if (notifier_kinds[i].ops == NULL)
            continue;
        const char *before = k == 0 ? "" : (sep[0] == '|' ? "|" : (i == last ? " or " : ", "));
        off += (size_t)snprintf(out + off, sizeof(buf[0]) - off, "%s%s", before, notifier_kinds[i].name);
        k++;
    }
    return out;
}

static void usage(const char *msg)
{
    fprintf(stderr, "notify-scale: %s\nusage: notify-scale --notifier %s "
                    "--fds N --active A [--iters K] [--cpu C]\n",
            msg, backend_names("|"));
    exit(2);
}

static void kick(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof(one)) != sizeof(one))
        die("write eventfd");
}

static void open_fds(struct ctx *x)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)x->nfds + 32;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    x->fds = calloc((size_t)x->nfds, sizeof(int));
    if (x->fds == NULL)
        die("calloc");
    for (int i = 0; i < x->nfds; i++) {
        x->fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (x->fds[i] < 0)
            die("eventfd (raise ulimit -n)");
    }
    /* Spread the ready ones over the range so a scan cannot stop early. */
    for (int k = 0; k < x->active; k++)
        kick(x->fds[(int)((long)k * x->nfds / x->active)]);
}

static void setup(struct ctx *x)
{
    if (x->ops == &notifier_select && x->nfds + 16 > FD_SETSIZE)
        usage("select cannot watch descriptors at or above FD_SETSIZE (1024)");
    int maxfd = 0;
    for (int i = 0; i < x->nfds; i++)
        if (x->fds[i] > maxfd)
            maxfd = x->fds[i];
    struct notifier_env env = {.maxfd = maxfd + 1, .lock = NULL};
    x->nt = x->ops->create(&env);
    if (x->nt == NULL)
        die("creating the notifier");
    for (int i = 0; i < x->nfds; i++)
        if (x->ops->add(x->nt, x->fds[i]) < 0)
            die("adding a descriptor");
}

/* One round; returns the descriptors reported and adds the time of the
 * wait and the re-arms to *ns. */
static int call(struct ctx *x, uint64_t *ns)
{
    int ready[MAX_EVENTS];
    uint64_t t0 = now_ns();
    int n = x->ops->wait(x->nt, ready, MAX_EVENTS, false);
    if (n < 0)
        die("wait");
    /* Edge-triggered: a server that drains never re-arms (rearm() is for giving read interest back after
     * arm_write, notifier.h), so its round is the wait alone. */
    for (int i = 0; i < n && !x->ops->edge; i++)
        if (x->ops->rearm(x->nt, ready[i]) < 0)
            die("rearm");
    *ns += now_ns() - t0;
    if (x->ops->edge) /* a new arrival: the next wait reports it again */
        for (int i = 0; i < n; i++)
            kick(ready[i]);
    return n;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"notifier", required_argument, NULL, 'n'}, {"fds", required_argument, NULL, 'f'},
        {"active", required_argument, NULL, 'a'},   {"iters", required_argument, NULL, 'i'},
        {"cpu", required_argument, NULL, 'c'},      {NULL, 0, NULL, 0},
    };
    struct ctx x = {.iters = 20000};
    uint64_t v;
    int ch, cpu = -1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'n': x.name = optarg; break;
        case 'f':
            if (parse_u64(optarg, 1, 1000000, &v) < 0)
                usage("--fds: expected an integer 1..1000000");
            x.nfds = (int)v;
            break;
        case 'a':
            if (parse_u64(optarg, 1, MAX_EVENTS, &v) < 0)
                usage("--active: expected an integer 1..64 (what one wait returns at most)");
            x.active = (int)v;
            break;
        case 'i':
            if (parse_u64(optarg, 1, 100000000, &v) < 0)
                usage("--iters: expected an integer >= 1");
            x.iters = (int)v;
            break;
        case 'c':
            if (parse_u64(optarg, 0, 4095, &v) < 0)
                usage("--cpu: expected a CPU number");
            cpu = (int)v;
            break;
        default: usage("unknown option");
        }
    }
    if (x.name == NULL || x.nfds == 0 || x.active == 0)
        usage("--notifier, --fds and --active are required");
    int id = notifier_find(x.name);
    if (id < 0 || notifier_kinds[id].ops == NULL) {
        char msg[320];
        snprintf(msg, sizeof(msg), "--notifier must be %s", backend_names(", "));
        usage(msg);
    }
    x.ops = notifier_kinds[id].ops;
    if (x.active > x.nfds)
        usage("--active exceeds --fds");
    if (cpu >= 0 && pin_self_to_cpu(cpu) < 0)
        die("pin");
    open_fds(&x);
    setup(&x);

    uint64_t ns = 0;
    int warm = x.iters / 10 + 1;
    for (int i = 0; i < warm; i++)
        call(&x, &ns);
    ns = 0;
    long ready = 0;
    for (int i = 0; i < x.iters; i++)
        ready += call(&x, &ns);
    printf("{\"notifier\": \"%s\", \"fds\": %d, \"active\": %d, \"iters\": %d, \"us_per_call\": %.4f, "
           "\"ready_per_call\": %.2f}\n",
           x.name, x.nfds, x.active, x.iters, (double)ns / 1e3 / x.iters, (double)ready / x.iters);

    x.ops->destroy(x.nt);
    for (int i = 0; i < x.nfds; i++)
        close(x.fds[i]);
    free(x.fds);
    return 0;
}
