/* tpc.c -- thread per connection (seed 002): one acceptor thread accepts and
 * starts one thread per connection, which serves it with blocking I/O and
 * exits when it closes.  --threads T is the number of CPU slots: connection k
 * (in accept order) runs in slot k mod T, pinned to the slot's CPU.  Each
 * exiting thread's statistics are merged into its slot after the join, so
 * threads_detail holds T "connection" entries and then the acceptor. */
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

/* Small stacks so that thousands of connections cost little memory: a
 * connection thread only runs the read / work / echo loop. */
#define CONN_STACK_SIZE (256 * 1024)

struct cthr {
    pthread_t tid;
    struct server *s;
    struct conn *c;
    int slot;
    int cpu;
    struct tstat st;
    struct cthr *prev, *next; /* live list: may still be blocked on c->fd */
    struct cthr *done_next;   /* finished, waiting to be joined */
};

struct tpc {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* running dropped to 0 */
    struct cthr *live;
    struct cthr *done;
    int running; /* created and not yet on the done list */
    uint64_t seq; /* connections placed; acceptor only */
    pthread_attr_t attr;
    int efd; /* wakes the acceptor: a thread finished, or shutdown */
};

static struct tpc T = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
    .efd = -1,
};

static void live_unlink(struct cthr *ct)
{
    if (ct->prev != NULL)
        ct->prev->next = ct->next;
    else
        T.live = ct->next;
    if (ct->next != NULL)
        ct->next->prev = ct->prev;
    ct->prev = ct->next = NULL;
}

static void *conn_thread(void *arg)
{
    struct cthr *ct = arg;
    struct server *s = ct->s;
    instr_bind(&ct->st);
    if (ct->cpu >= 0 && pin_self_to_cpu(ct->cpu) < 0)
        die("cannot pin a connection thread to CPU %d: %s", ct->cpu, strerror(errno));
    /* A reply the socket does not take for --stall-ms ends the connection (SO_SNDTIMEO, conn_open). */
    while (conn_read(&s->ct, ct->c) == RD_MSG && conn_respond(&s->ct, ct->c) == WR_DONE) {
    }
    /* Off the live list before the close: shutdown must never reach a
     * descriptor number that has been reused by a newer connection. */
    pthread_mutex_lock(&T.mu);
    live_unlink(ct);
    pthread_mutex_unlock(&T.mu);
    conn_close(&s->ct, ct->c);
    tstat_close(&ct->st);
    pthread_mutex_lock(&T.mu);
    ct->done_next = T.done;
    T.done = ct;
    if (--T.running == 0)
        pthread_cond_broadcast(&T.idle);
    pthread_mutex_unlock(&T.mu);
    efd_kick(T.efd);
    return NULL;
}

/* Joins the finished threads and merges their statistics into their slots.
 * Only one thread reaps at a time: the acceptor, then main after joining it. */
static void reap(struct server *s)
{
    pthread_mutex_lock(&T.mu);
    struct cthr *ct = T.done;
    T.done = NULL;
    pthread_mutex_unlock(&T.mu);
    while (ct != NULL) {
        struct cthr *next = ct->done_next;
        pthread_join(ct->tid, NULL);
        tstat_merge(&s->thr[ct->slot].st, &ct->st);
        free(ct->st.in);
        free(ct);
        ct = next;
    }
}

/* accept_all closes the connection when this fails (no memory, no thread):
 * the others keep being served and the acceptor goes back to waiting. */
static int place(struct conn *c, void *arg)
{
    struct server *s = arg;
    struct cthr *ct = calloc(1, sizeof(*ct));
    if (ct == NULL)
        return -1;
    ct->s = s;
    ct->c = c;
    ct->slot = (int)(T.seq++ % (uint64_t)s->cfg.threads);
    ct->cpu = s->thr[ct->slot].cpu;
    if (s->cfg.instrument && (ct->st.in = tinstr_new()) == NULL) {
        free(ct);
        return -1;
    }
    /* Created under the lock: shutdown either sees the thread in the live
     * list or the acceptor sees the stop flag, and tid is written before the
     * thread can reach the done list. */
    pthread_mutex_lock(&T.mu);
    int rc = -1;
    if (!stopping(s)) {
        ct->next = T.live;
        if (T.live != NULL)
            T.live->prev = ct;
        T.live = ct;
        T.running++;
        rc = pthread_create(&ct->tid, &T.attr, conn_thread, ct);
        if (rc != 0) {
            live_unlink(ct);
            T.running--;
        }
    }
    pthread_mutex_unlock(&T.mu);
    if (rc != 0) {
        free(ct->st.in);
        free(ct);
        return -1;
    }
    return 0;
}

static void back_off(void)
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    SYSC(nanosleep(&ts, NULL));
}

static void *acceptor_loop(void *arg)
{
    struct server *s = arg;
    struct pollfd p[2] = {{.fd = s->ct.lfd, .events = POLLIN}, {.fd = T.efd, .events = POLLIN}};
    while (!stopping(s)) {
        int n = SYSC(poll(p, 2, -1));
        if (n < 0) {
            if (errno != EINTR)
                back_off();
            continue;
        }
        if (p[1].revents != 0)
            efd_drain(T.efd);
        reap(s);
        if (p[0].revents != 0) {
            accept_all(&s->ct, place, s);
            /* accept_all stops at the accept_one failure; anything but an
             * empty backlog (EMFILE without a reserve, ENOBUFS, ...) would
             * leave the listener readable and the poll spinning. */
            if (!stopping(s) && errno != EAGAIN && errno != EWOULDBLOCK)
                back_off();
        }
    }
    return NULL;
}

static int tpc_start(struct server *s)
{
    if (s->cfg.ncpus > 0) {
        cpu_set_t mask;
        if (sched_getaffinity(0, sizeof(mask), &mask) < 0)
            return -1;
        for (int i = 0; i < s->cfg.threads; i++) {
            int cpu = s->cfg.cpus[i % s->cfg.ncpus];
            /* A connection thread pins itself only once a connection comes:
             * refuse a CPU it cannot use now rather than die mid-run. */
            if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask))
                die("cannot pin connection threads to CPU %d: not in this process's CPU mask", cpu);
        }
    }
    T.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (T.efd < 0)
        return -1;
    int rc = pthread_attr_init(&T.attr);
    if (rc == 0)
        rc = pthread_attr_setstacksize(&T.attr, CONN_STACK_SIZE);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    for (int i = 0; i < s->cfg.threads; i++)
        thr_reserve(s, "connection");
    spawn(s, "acceptor", acceptor_loop, s);
    return 0;
}

static void tpc_wake(struct server *s)
{
    (void)s;
    /* Every thread blocked in recv or send (or about to be) returns at once on
     * a shut-down socket; its own close follows. */
    pthread_mutex_lock(&T.mu);
    for (struct cthr *ct = T.live; ct != NULL; ct = ct->next)
        SYSC(shutdown(ct->c->fd, SHUT_RDWR));
    pthread_mutex_unlock(&T.mu);
    efd_kick(T.efd);
    pthread_mutex_lock(&T.mu);
    while (T.running > 0)
        SYSC(pthread_cond_wait(&T.idle, &T.mu));
    pthread_mutex_unlock(&T.mu);
}

static void tpc_cleanup(struct server *s)
{
    reap(s); /* the acceptor is joined: what is left is ours */
    pthread_attr_destroy(&T.attr);
    close(T.efd);
}

const struct pattern_ops pattern_tpc = {
    .name = "tpc",
    .min_threads = 1,
    .max_threads = MAX_THREADS,
    .notifiers = NOTIFIER_BIT(NOTIFIER_NONE),
    .start = tpc_start,
    .wake_all = tpc_wake,
    .cleanup = tpc_cleanup,
};
