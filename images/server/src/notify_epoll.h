/* notify_epoll.h -- the epoll instance both epoll notifiers share; they differ
 * only in the event mask a descriptor is armed with. */
#ifndef DEMUX_NOTIFY_EPOLL_H
#define DEMUX_NOTIFY_EPOLL_H

#include <sys/epoll.h>

#include "notifier.h"
#include "efd.h"

struct ep {
    struct notifier base;
    int epfd;
    int efd; /* wake-up eventfd, level-triggered, never one-shot */
    uint32_t mask;
    struct epoll_event evs[MAX_EVENTS];
};

struct notifier *ep_create(const struct notifier_ops *ops, const struct notifier_env *env, uint32_t mask);
void ep_destroy(struct notifier *b);
int ep_add(struct notifier *b, int fd);
int ep_del(struct notifier *b, int fd);
int ep_wait(struct notifier *b, int *fds, int max, bool block);
void ep_wake(struct notifier *b);

#endif
