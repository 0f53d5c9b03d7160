/* notify_epoll_et.c -- edge-triggered epoll: a descriptor is reported once per
 * arrival of new data; the handler reads until EAGAIN and never re-arms. */
#include <sys/epoll.h>

#include "notify_epoll.h"

static struct notifier *et_create(const struct notifier_env *env)
{
    return ep_create(&notifier_epoll_et, env, EPOLLIN | EPOLLET);
}

static int et_rearm(struct notifier *b, int fd)
{
    (void)b;
    (void)fd;
    return 0;
}

const struct notifier_ops notifier_epoll_et = {
    .edge = true,
    .create = et_create,
    .destroy = ep_destroy,
    .add = ep_add,
    .del = ep_del,
    .rearm = et_rearm,
    .wait = ep_wait,
    .wake = ep_wake,
};
