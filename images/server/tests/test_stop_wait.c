/* test_stop_wait.c -- an instrumented wait sees the stop whose wake-up its first call took.
 *
 * The stop's wake() comes after the stop flag is set.  notifier_wait_timed (instr.h), with --instrument,
 * waits in two calls: a non-blocking one, then, if it returned nothing, a blocking one.  Every back-end
 * drains its kick (or reaps its no-op) in any call, so a wake-up that lands before the first call is
 * taken by it, and the second call would block for good: a server that never exits on SIGTERM (CI saw
 * LF over select under TSan hang so).
 *
 *   test_stop_wait stop       every readiness notifier: wake(), then a timed wait with the stop flag set
 *                             returns 0 at once; prints "ok" (an alarm ends a hung wait after 2 s)
 *   test_stop_wait flag-off NAME
 *                             the same wait with the flag clear: it must block (the first call took the
 *                             wake-up), so the alarm ends the process; this shows the flag is what ends it
 */
#include "instr.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct notifier *make(int id)
{
    struct notifier_env env = {.maxfd = 1024, .lock = NULL};
    struct notifier *nt = notifier_kinds[id].ops->create(&env);
    if (nt == NULL) {
        fprintf(stderr, "cannot create notifier %s\n", notifier_kinds[id].name);
        exit(3);
    }
    return nt;
}

static int wait_after_wake(int id, bool stop_set)
{
    struct notifier *nt = make(id);
    atomic_bool stop;
    atomic_init(&stop, stop_set);
    int fds[MAX_EVENTS];
    nt->ops->wake(nt);
    int n = notifier_wait_timed(nt, fds, MAX_EVENTS, &stop);
    nt->ops->destroy(nt);
    return n;
}

int main(int argc, char **argv)
{
    static struct tstat ts;
    ts.in = tinstr_new();
    if (ts.in == NULL)
        return 3;
    instr_bind(&ts);
    alarm(2);
    if (argc == 2 && strcmp(argv[1], "stop") == 0) {
        for (int id = 0; id < NOTIFIER_COUNT; id++) {
            if (notifier_kinds[id].ops == NULL)
                continue;
            int n = wait_after_wake(id, true);
            if (n != 0) {
                fprintf(stderr, "%s: %d descriptors after a wake-up with none armed\n", notifier_kinds[id].name,
                        n);
                return 1;
            }
            printf("%s\n", notifier_kinds[id].name);
        }
        printf("ok\n");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "flag-off") == 0) {
        int id = notifier_find(argv[2]);
        if (id < 0 || notifier_kinds[id].ops == NULL) {
            fprintf(stderr, "no notifier %s\n", argv[2]);
            return 2;
        }
        printf("returned %d\n", wait_after_wake(id, false));
        return 0;
    }
    fprintf(stderr, "usage: test_stop_wait stop | flag-off NAME\n");
    return 2;
}
