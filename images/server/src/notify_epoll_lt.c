/* notify_epoll_lt.c -- level-triggered epoll with EPOLLONESHOT: a reported
 * descriptor is deactivated by the kernel and re-armed with EPOLL_CTL_MOD once
 * its message is processed (seeds 000 §2, 001 §II); for writability with
 * EPOLLOUT instead of EPOLLIN. */
#include <sys/epoll.h>

#include "notify_epoll.h"

static struct notifier *lt_create(const struct notifier_env *env)
{
    return ep_create(&notifier_epoll_lt, env, EPOLLIN | EPOLLONESHOT);
}

static int lt_rearm(struct notifier *b, int fd)
{
    struct ep *n = (struct ep *)b;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.fd = fd};
    return SYSC(epoll_ctl(n->epfd, EPOLL_CTL_MOD, fd, &ev));
}

static int lt_arm_write(struct notifier *b, int fd)
{
    struct ep *n = (struct ep *)b;
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLONESHOT, .data.fd = fd};
    return SYSC(epoll_ctl(n->epfd, EPOLL_CTL_MOD, fd, &ev));
}

const struct notifier_ops notifier_epoll_lt = {
    .edge = false,
    .create = lt_create,
    .destroy = ep_destroy,
    .add = ep_add,
    .del = ep_del,
    .rearm = lt_rearm,
    .arm_write = lt_arm_write,
    .wait = ep_wait,
    .wake = ep_wake,
};
