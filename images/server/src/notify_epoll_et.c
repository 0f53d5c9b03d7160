/* notify_epoll_et.c -- edge-triggered epoll: a descriptor is reported once per
 * arrival of new data; the handler reads until EAGAIN and never re-arms, unless
 * its reply had to wait for writability: arm_write makes the interest EPOLLOUT
 * alone (EPOLL_CTL_MOD, which reports it at once if it is writable now), and
 * rearm gives EPOLLIN back the same way (reported at once if data came). */
#include <sys/epoll.h>

#include "notify_epoll.h"

static struct notifier *et_create(const struct notifier_env *env)
{
    return ep_create(&notifier_epoll_et, env, EPOLLIN | EPOLLET);
}

static int et_mod(struct notifier *b, int fd, uint32_t events)
{
    struct ep *n = (struct ep *)b;
    struct epoll_event ev = {.events = events | EPOLLET, .data.fd = fd};
    return SYSC(epoll_ctl(n->epfd, EPOLL_CTL_MOD, fd, &ev));
}

static int et_rearm(struct notifier *b, int fd)
{
    return et_mod(b, fd, EPOLLIN);
}

static int et_arm_write(struct notifier *b, int fd)
{
    return et_mod(b, fd, EPOLLOUT);
}

const struct notifier_ops notifier_epoll_et = {
    .edge = true,
    .create = et_create,
    .destroy = ep_destroy,
    .add = ep_add,
    .del = ep_del,
    .rearm = et_rearm,
    .arm_write = et_arm_write,
    .wait = ep_wait,
    .wake = ep_wake,
};
