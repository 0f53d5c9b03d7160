/* notify_epoll.c -- what epoll-lt and epoll-et share: the instance, add, del,
 * wait and the wake-up eventfd. */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "notify_epoll.h"

struct notifier *ep_create(const struct notifier_ops *ops, const struct notifier_env *env, uint32_t mask)
{
    struct ep *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    notifier_init(&n->base, ops, env);
    n->mask = mask;
    n->epfd = epoll_create1(EPOLL_CLOEXEC);
    n->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = n->efd};
    if (n->epfd < 0 || n->efd < 0 || epoll_ctl(n->epfd, EPOLL_CTL_ADD, n->efd, &ev) < 0) {
        if (n->epfd >= 0)
            close(n->epfd);
        if (n->efd >= 0)
            close(n->efd);
        free(n);
        return NULL;
    }
    return &n->base;
}

void ep_destroy(struct notifier *b)
{
    struct ep *n = (struct ep *)b;
    close(n->epfd);
    close(n->efd);
    free(n);
}

int ep_add(struct notifier *b, int fd)
{
    struct ep *n = (struct ep *)b;
    struct epoll_event ev = {.events = n->mask, .data.fd = fd};
    return SYSC(epoll_ctl(n->epfd, EPOLL_CTL_ADD, fd, &ev));
}

int ep_del(struct notifier *b, int fd)
{
    struct ep *n = (struct ep *)b;
    return SYSC(epoll_ctl(n->epfd, EPOLL_CTL_DEL, fd, NULL));
}

int ep_wait(struct notifier *b, int *fds, int max, bool block)
{
    struct ep *n = (struct ep *)b;
    if (max > MAX_EVENTS)
        max = MAX_EVENTS;
    int r = SYSC(epoll_wait(n->epfd, n->evs, max, block ? -1 : 0));
    if (r < 0)
        return errno == EINTR ? 0 : -1;
    int got = 0;
    for (int i = 0; i < r; i++) {
        if (n->evs[i].data.fd == n->efd)
            efd_drain(n->efd);
        else
            fds[got++] = n->evs[i].data.fd;
    }
    return got;
}

void ep_wake(struct notifier *b)
{
    struct ep *n = (struct ep *)b;
    efd_kick(n->efd);
}
