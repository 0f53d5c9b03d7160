/* notify_poll.c -- poll(2) notifier.  The interest set is a pollfd array under
 * the interest-set lock; a deactivated descriptor is stored negated (~fd),
 * which poll() skips, and an entry's events say what it is armed for (POLLIN,
 * or POLLOUT after arm_write).  The waiter polls a private copy; slot 0 is an
 * eventfd that lets a re-arm reach a waiter already blocked. */
#include "notifier.h"
#include "efd.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct pol {
    struct notifier base;
    pthread_mutex_t lock;
    struct pollfd *set; /* set[0] is the eventfd */
    int *slot;          /* descriptor -> index in set, -1 if absent */
    int n, cap, maxfd;
    struct pollfd *copy; /* the waiter's */
    bool waiting, kicked;
};

static struct notifier *pol_create(const struct notifier_env *env)
{
    int maxfd = env->maxfd;
    struct pol *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->maxfd = maxfd;
    /* Sized for every descriptor up front: the waiter's copy must not move
     * while it is blocked in poll(). */
    n->cap = maxfd + 1;
    n->set = calloc((size_t)n->cap, sizeof(*n->set));
    n->copy = calloc((size_t)n->cap, sizeof(*n->copy));
    n->slot = malloc((size_t)maxfd * sizeof(*n->slot));
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (n->set == NULL || n->copy == NULL || n->slot == NULL || efd < 0) {
        if (efd >= 0)
            close(efd);
        free(n->set);
        free(n->copy);
        free(n->slot);
        free(n);
        return NULL;
    }
    memset(n->slot, 0xff, (size_t)maxfd * sizeof(*n->slot));
    n->set[0] = (struct pollfd){.fd = efd, .events = POLLIN};
    n->n = 1;
    notifier_init(&n->base, &notifier_poll, env);
    pthread_mutex_init(&n->lock, NULL);
    return &n->base;
}

static void pol_destroy(struct notifier *b)
{
    struct pol *n = (struct pol *)b;
    close(n->set[0].fd);
    pthread_mutex_destroy(&n->lock);
    free(n->set);
    free(n->copy);
    free(n->slot);
    free(n);
}

static void kick_locked(struct pol *n)
{
    if (n->waiting && !n->kicked) {
        notifier_kick(&n->base, n->set[0].fd);
        n->kicked = true;
    }
}

static int pol_add(struct notifier *b, int fd)
{
    struct pol *n = (struct pol *)b;
    if (fd < 0 || fd >= n->maxfd)
        return -1;
    notifier_lock(&n->base, &n->lock);
    if (n->n == n->cap) {
        pthread_mutex_unlock(&n->lock);
        return -1;
    }
    n->slot[fd] = n->n;
    n->set[n->n++] = (struct pollfd){.fd = fd, .events = POLLIN};
    kick_locked(n);
    pthread_mutex_unlock(&n->lock);
    return 0;
}

static int pol_del(struct notifier *b, int fd)
{
    struct pol *n = (struct pol *)b;
    if (fd < 0 || fd >= n->maxfd)
        return -1;
    notifier_lock(&n->base, &n->lock);
    int i = n->slot[fd];
    if (i > 0) {
        int last = n->n - 1;
        n->set[i] = n->set[last];
        int lfd = n->set[i].fd < 0 ? ~n->set[i].fd : n->set[i].fd;
        n->slot[lfd] = i;
        n->slot[fd] = -1;
        n->n--;
    }
    pthread_mutex_unlock(&n->lock);
    return 0;
}

static int arm(struct pol *n, int fd, short events)
{
    notifier_lock(&n->base, &n->lock);
    int i = fd >= 0 && fd < n->maxfd ? n->slot[fd] : -1;
    if (i > 0) {
        n->set[i].fd = fd;
        n->set[i].events = events;
        kick_locked(n);
    }
    pthread_mutex_unlock(&n->lock);
    return i > 0 ? 0 : -1;
}

static int pol_rearm(struct notifier *b, int fd)
{
    return arm((struct pol *)b, fd, POLLIN);
}

static int pol_arm_write(struct notifier *b, int fd)
{
    return arm((struct pol *)b, fd, POLLOUT);
}

static int pol_wait(struct notifier *b, int *fds, int max, bool block)
{
    struct pol *n = (struct pol *)b;
    notifier_lock(&n->base, &n->lock);
    int cnt = n->n;
    memcpy(n->copy, n->set, (size_t)cnt * sizeof(*n->copy));
    n->waiting = true;
    pthread_mutex_unlock(&n->lock);

    int r = SYSC(poll(n->copy, (nfds_t)cnt, block ? -1 : 0));

    notifier_lock(&n->base, &n->lock);
    n->waiting = false;
    if (r < 0) {
        pthread_mutex_unlock(&n->lock);
        return errno == EINTR ? 0 : -1;
    }
    if (n->copy[0].revents != 0) {
        efd_drain(n->copy[0].fd);
        n->kicked = false;
        r--;
    }
    int got = 0;
    for (int k = 1; k < cnt && r > 0 && got < max; k++) {
        if (n->copy[k].revents == 0)
            continue;
        r--;
        int fd = n->copy[k].fd;
        /* Deletes may have moved slots since the copy; look the fd up again. */
        int i = n->slot[fd];
        if (i <= 0 || n->set[i].fd != fd)
            continue;
        n->set[i].fd = ~fd;
        fds[got++] = fd;
    }
    pthread_mutex_unlock(&n->lock);
    return got;
}

static void pol_wake(struct notifier *b)
{
    struct pol *n = (struct pol *)b;
    pthread_mutex_lock(&n->lock);
    efd_kick(n->set[0].fd);
    n->kicked = true;
    pthread_mutex_unlock(&n->lock);
}

const struct notifier_ops notifier_poll = {
    .edge = false,
    .create = pol_create,
    .destroy = pol_destroy,
    .add = pol_add,
    .del = pol_del,
    .rearm = pol_rearm,
    .arm_write = pol_arm_write,
    .wait = pol_wait,
    .wake = pol_wake,
};
