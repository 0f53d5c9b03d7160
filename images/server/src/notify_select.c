/* notify_select.c -- select(2) notifier.  The interest set is an fd_set kept in
 * user space under a mutex (the interest-set lock): the waiter copies it before
 * each call, and deactivation/re-activation are bit changes (seed 000 §5.1).
 * Write interest (arm_write) is a second fd_set, passed as select's write set;
 * a descriptor is in at most one of the two.  An eventfd in every call lets a
 * re-arm reach a waiter already blocked. */
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
    fd_set winterest; /* armed for writability instead */
    int maxfd;        /* highest descriptor ever armed */
    int efd;
    bool waiting; /* a waiter is inside select() and needs a kick to see changes */
    bool kicked;
    fd_set ready, wready; /* the waiter's copies */
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
    FD_ZERO(&n->winterest);
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

static int arm(struct sel *n, int fd, bool write)
{
    if (fd < 0 || fd >= FD_SETSIZE)
        return -1;
    notifier_lock(&n->base, &n->lock);
    FD_SET(fd, write ? &n->winterest : &n->interest);
    FD_CLR(fd, write ? &n->interest : &n->winterest);
    if (fd > n->maxfd)
        n->maxfd = fd;
    kick_locked(n);
    pthread_mutex_unlock(&n->lock);
    return 0;
}

static int sel_arm(struct notifier *b, int fd)
{
    return arm((struct sel *)b, fd, false);
}

static int sel_arm_write(struct notifier *b, int fd)
{
    return arm((struct sel *)b, fd, true);
}

static int sel_del(struct notifier *b, int fd)
{
    struct sel *n = (struct sel *)b;
    if (fd < 0 || fd >= FD_SETSIZE)
        return -1;
    notifier_lock(&n->base, &n->lock);
    FD_CLR(fd, &n->interest);
    FD_CLR(fd, &n->winterest);
    pthread_mutex_unlock(&n->lock);
    return 0;
}

static int sel_wait(struct notifier *b, int *fds, int max, bool block)
{
    struct sel *n = (struct sel *)b;
    notifier_lock(&n->base, &n->lock);
    n->ready = n->interest;
    n->wready = n->winterest;
    int nfds = n->maxfd + 1;
    n->waiting = true;
    pthread_mutex_unlock(&n->lock);
    FD_SET(n->efd, &n->ready);

    struct timeval zero = {0, 0};
    int r = SYSC(select(nfds, &n->ready, &n->wready, NULL, block ? NULL : &zero));

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
    /* Descriptors beyond `max` stay armed and are reported by the next call.  A bit counts only for the
     * interest it was armed with: deleted or re-armed the other way meanwhile, it is not reported. */
    for (int fd = 0; fd < nfds && r > 0 && got < max; fd++) {
        if (fd == n->efd)
            continue;
        bool rd = FD_ISSET(fd, &n->ready), wr = FD_ISSET(fd, &n->wready);
        if (!rd && !wr)
            continue;
        r -= rd + wr;
        if (!(rd && FD_ISSET(fd, &n->interest)) && !(wr && FD_ISSET(fd, &n->winterest)))
            continue;
        FD_CLR(fd, &n->interest);
        FD_CLR(fd, &n->winterest);
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
    .arm_write = sel_arm_write,
    .wait = sel_wait,
    .wake = sel_wake,
};
