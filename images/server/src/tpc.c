/* tpc.c -- thread per connection with blocking I/O and no notifier: a pool of
 * T threads, each blocking in accept(), then serving that one connection until
 * it closes.  At most T connections are served at once; later ones wait in the
 * listen backlog until a thread is free. */
#include "server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

static void serve(struct server *s, struct conn *c)
{
    while (!stopping()) {
        enum rd r = conn_read(s, c);
        if (r != RD_MSG || conn_respond(s, c) < 0)
            break;
    }
    conn_close(s, c);
}

static void *tpc_loop(void *arg)
{
    struct server *s = arg;
    /* SIGUSR1 (a no-op handler) is how shutdown interrupts a blocked call. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    while (!stopping()) {
        uint64_t t0 = instr_start();
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EINTR && errno != ECONNABORTED) {
                /* EMFILE and the like: blocking accept cannot spend a reserve
                 * descriptor race-free across T threads; back off instead of
                 * spinning. */
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        instr_end(OP_ACCEPT, t0);
        struct conn *c = conn_open(s, fd);
        if (c != NULL)
            serve(s, c);
    }
    return NULL;
}

static int tpc_start(struct server *s)
{
    for (int i = 0; i < s->threads; i++)
        spawn(s, "connection", tpc_loop, s);
    return 0;
}

static void tpc_wake(struct server *s)
{
    /* A signal can land just before a thread blocks, so repeat until every
     * thread has left (bounded: 10 s). */
    shutdown(s->lfd, SHUT_RD);
    for (int round = 0; round < 1000; round++) {
        bool all = true;
        for (int i = 0; i < s->nthr; i++)
            if (!atomic_load(&s->thr[i].done)) {
                all = false;
                pthread_kill(s->thr[i].tid, SIGUSR1);
            }
        if (all)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static const char *const notifiers[] = {"none", NULL};

const struct pattern_ops pattern_tpc = {
    .name = "tpc",
    .min_threads = 1,
    .max_threads = MAX_THREADS,
    .notifiers = notifiers,
    .start = tpc_start,
    .wake_all = tpc_wake,
    .cleanup = NULL,
};
