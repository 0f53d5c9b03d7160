/* notifiers.c -- the table of notifier names and back-ends (notifier.h). */
#include "notifier.h"

#include <stddef.h>
#include <string.h>

const struct notifier_kind notifier_kinds[NOTIFIER_COUNT] = {
    [NOTIFIER_SELECT] = {"select", &notifier_select},
    [NOTIFIER_POLL] = {"poll", &notifier_poll},
    [NOTIFIER_EPOLL_LT] = {"epoll-lt", &notifier_epoll_lt},
    [NOTIFIER_EPOLL_ET] = {"epoll-et", &notifier_epoll_et},
    [NOTIFIER_URING] = {"uring", &notifier_uring},
    [NOTIFIER_NONE] = {"none", NULL},
};

int notifier_find(const char *name)
{
    for (int i = 0; i < NOTIFIER_COUNT; i++)
        if (strcmp(notifier_kinds[i].name, name) == 0)
            return i;
    return -1;
}

const char *notifier_name(const struct notifier_ops *ops)
{
    for (int i = 0; i < NOTIFIER_COUNT; i++)
        if (notifier_kinds[i].ops == ops)
            return notifier_kinds[i].name;
    return "?";
}
