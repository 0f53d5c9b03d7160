/* lf.c -- Leader/Followers (seed 000 Fig. 4-5, seed 001 §III-B): T identical
 * threads; the leader takes a descriptor from the cache of the last notifier
 * call (calling the notifier only when the cache is empty), promotes a
 * follower, and processes the event in parallel with the others.
 *
 * Leadership is a flag under a mutex, and the followers wait for it on a
 * condition variable, as HSHA's workers wait for the queue: acquiring the mutex
 * is `lock` (contention), waiting for leadership is `idle` (there is nothing to
 * do while the leader waits in the notifier), so both patterns book waiting and
 * contention alike (images/README.md, "Fairness rules").  (Before 2026-12 a
 * follower blocked on the leader's mutex itself, held through the leader's
 * whole notifier wait, and booked that wait as `lock`.)  Promoting is giving up the flag and waking one sleeping follower if no
 * wake-up is already on its way (`promote`). */
#include "server.h"

struct lf {
    struct notifier *nt;
    pthread_mutex_t lock; /* guards the fields below it */
    pthread_cond_t turn;  /* followers wait here for leadership */
    bool led;             /* a thread is leader */
    int waiting;          /* followers inside pthread_cond_wait */
    int signaled;         /* wake-ups sent and not yet taken */
    int cache[MAX_EVENTS]; /* the leader's */
    int cached, next;
};

static struct lf L;

static int place(struct conn *c, void *arg)
{
    (void)arg;
    return conn_arm(c, L.nt);
}

/* Blocks until this thread is the leader; false once stopping. */
static bool lead(struct server *s)
{
    lock_timed(&L.lock);
    if (L.led && !stopping(s)) {
        uint64_t t0 = instr_start(); /* waiting for leadership: idle */
        while (L.led && !stopping(s)) {
            L.waiting++;
            SYSC(pthread_cond_wait(&L.turn, &L.lock));
            L.waiting--;
            if (L.signaled > 0) /* ours, or a spurious wake-up standing in for it */
                L.signaled--;
        }
        instr_end(OP_IDLE, t0);
    }
    bool ok = !stopping(s);
    if (ok)
        L.led = true;
    pthread_mutex_unlock(&L.lock);
    return ok;
}

static void promote(void)
{
    uint64_t t0 = instr_start();
    pthread_mutex_lock(&L.lock);
    L.led = false;
    bool wake = L.waiting > L.signaled;
    if (wake)
        L.signaled++;
    pthread_mutex_unlock(&L.lock);
    if (wake) /* a follower sleeps: the signal is a futex wake, counted */
        SYSC(pthread_cond_signal(&L.turn));
    instr_end(OP_PROMOTE, t0);
}

static void *lf_loop(void *arg)
{
    struct server *s = arg;
    struct notifier *nt = L.nt;
    while (lead(s)) {
        int fd = -1;
        while (!stopping(s)) {
            if (L.next < L.cached) {
                fd = L.cache[L.next++];
                if (fd != s->ct.lfd)
                    break;
                /* The leader accepts before promoting, so only one thread
                 * ever runs the accept loop. */
                accept_all(&s->ct, place, NULL);
                if (!nt->ops->edge)
                    nt->ops->rearm(nt, s->ct.lfd);
                fd = -1;
                continue;
            }
            int n = notifier_wait_timed(nt, L.cache, MAX_EVENTS, &s->ct.stop);
            L.cached = n;
            L.next = 0;
        }
        promote();
        if (fd < 0)
            break;
        conn_ready(&s->ct, nt, conn_at(&s->ct, fd), true);
    }
    return NULL;
}

static int lf_start(struct server *s)
{
    L.nt = server_notifier(s);
    if (L.nt == NULL || L.nt->ops->add(L.nt, s->ct.lfd) < 0)
        return -1;
    pthread_mutex_init(&L.lock, NULL);
    pthread_cond_init(&L.turn, NULL);
    for (int i = 0; i < s->cfg.threads; i++)
        spawn(s, "leader-follower", lf_loop, s);
    return 0;
}

/* After the stop flag: the leader's wait returns, and every follower sees the flag. */
static void lf_wake(struct server *s)
{
    (void)s;
    L.nt->ops->wake(L.nt);
    pthread_mutex_lock(&L.lock);
    pthread_cond_broadcast(&L.turn);
    pthread_mutex_unlock(&L.lock);
}

static void lf_cleanup(struct server *s)
{
    (void)s;
    L.nt->ops->destroy(L.nt);
    pthread_mutex_destroy(&L.lock);
    pthread_cond_destroy(&L.turn);
}

const struct pattern_ops pattern_lf = {
    .name = "lf",
    .min_threads = 1,
    .max_threads = MAX_THREADS,
    .notifiers = NOTIFIERS_READINESS,
    .start = lf_start,
    .wake_all = lf_wake,
    .cleanup = lf_cleanup,
};
