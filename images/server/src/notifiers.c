/* notifiers.c -- the table of notifier names and back-ends, from notifier.h's NOTIFIER_TABLE. */
#include "notifier.h"

#include <stddef.h>
#include <string.h>

#define NOTIFIER_ROW_(id, name, ops) [NOTIFIER_##id] = {name, &ops},
const struct notifier_kind notifier_kinds[NOTIFIER_COUNT] = {
    NOTIFIER_TABLE(NOTIFIER_ROW_)
    [NOTIFIER_NONE] = {"none", NULL},
};
#undef NOTIFIER_ROW_

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
