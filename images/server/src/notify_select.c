/* notify_select.c -- select(2) notifier.  The interest set is an fd_set kept in
 * user space under a mutex (the interest-set lock): the waiter copies it before
 * each call, and deactivation/re-activation are bit changes (seed 000 §5.1).
 * An eventfd in every call lets a re-arm reach a waiter already blocked. */
#include "notifier.h"
#include "efd.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <unistd.h>

struct sel {
    struct notifier base;
    pthread_mutex_t lock;
    fd_set interest;
    int maxfd; /* highest descriptor ever added */
    int efd;
    bool waiting; /* a waiter is inside select() and needs a kick to see changes */
    bool kicked;
    fd_set ready; /* the waiter's copy */
};

static struct notifier *sel_create(const struct notifier_env *env)
{
    struct sel *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (n->efd < 0 || n->efd >= FD_SETSIZE) {
        if (n->efd >= 0)
            close(n->efd);
        free(n);
        return NULL;
    }
    notifier_init(&n->base, &notifier_select, env);
    pthread_mutex_init(&n->lock, NULL);
    FD_ZERO(&n->interest);
    n->maxfd = n->efd;
    return &n->base;
}

static void sel_destroy(struct notifier *b)
{
    struct sel *n = (struct sel *)b;
    close(n->efd);
    pthread_mutex_destroy(&n->lock);
    free(n);
}

/* Called with the lock held. */
static void kick_locked(struct sel *n)
{
    if (n->waiting && !n->kicked) {
        notifier_kick(&n->base, n->efd);
        n->kicked = true;
    }
}

static int sel_arm(struct notifier *b, int fd)
{
    struct sel *n = (struct sel *)b;
    if (fd < 0 || fd >= FD_SETSIZE)
        return -1;
    notifier_lock(&n->base, &n->lock);
    FD_SET(fd, &n->interest);
    if (fd > n->maxfd)
        n->maxfd = fd;
    kick_locked(n);
    pthread_mutex_unlock(&n->lock);
    return 0;
}

static int sel_del(struct notifier *b, int fd)
{
    struct sel *n = (struct sel *)b;
    if (fd < 0 || fd >= FD_SETSIZE)
        return -1;
    notifier_lock(&n->base, &n->lock);
    FD_CLR(fd, &n->interest);
    pthread_mutex_unlock(&n->lock);
    return 0;
}

static int sel_wait(struct notifier *b, int *fds, int max, bool block)
{
    struct sel *n = (struct sel *)b;
    notifier_lock(&n->base, &n->lock);
    n->ready = n->interest;
    int nfds = n->maxfd + 1;
    n->waiting = true;
    pthread_mutex_unlock(&n->lock);
    FD_SET(n->efd, &n->ready);

    struct timeval zero = {0, 0};
    int r = select(nfds, &n->ready, NULL, NULL, block ? NULL : &zero);

    notifier_lock(&n->base, &n->lock);
    n->waiting = false;
    if (r < 0) {
        pthread_mutex_unlock(&n->lock);
        return errno == EINTR ? 0 : -1;
    }
    int got = 0;
    if (FD_ISSET(n->efd, &n->ready)) {
        efd_drain(n->efd);
        n->kicked = false;
        r--;
    }
    /* Descriptors beyond `max` stay armed and are reported by the next call. */
    for (int fd = 0; fd < nfds && r > 0 && got < max; fd++) {
        if (fd == n->efd || !FD_ISSET(fd, &n->ready))
            continue;
        r--;
        if (!FD_ISSET(fd, &n->interest)) /* deleted meanwhile */
            continue;
        FD_CLR(fd, &n->interest);
        fds[got++] = fd;
    }
    pthread_mutex_unlock(&n->lock);
    return got;
}

static void sel_wake(struct notifier *b)
{
    struct sel *n = (struct sel *)b;
    pthread_mutex_lock(&n->lock);
    efd_kick(n->efd);
    n->kicked = true;
    pthread_mutex_unlock(&n->lock);
}

const struct notifier_ops notifier_select = {
    .edge = false,
    .create = sel_create,
    .destroy = sel_destroy,
    .add = sel_arm,
    .del = sel_del,
    .rearm = sel_arm,
    .wait = sel_wait,
    .wake = sel_wake,
};
