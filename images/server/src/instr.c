/* instr.c -- see instr.h. */
#include "instr.h"

#include <stdlib.h>
#include <time.h>

_Thread_local struct tstat *instr_ts;

const char *const op_names[OP_COUNT] = {
    [OP_NOTIFY] = "notify",     [OP_LOCK] = "lock",   [OP_QUEUE_PUT] = "queue_put", [OP_QUEUE_GET] = "queue_get",
    [OP_PROMOTE] = "promote",   [OP_RECV] = "recv",   [OP_REARM] = "rearm",         [OP_WORK] = "work",
    [OP_WORK_CPU] = "work_cpu", [OP_SEND] = "send",   [OP_ACCEPT] = "accept",       [OP_IDLE] = "idle",
    [OP_KICK] = "kick",
};

/* The calling thread's CPU time: a syscall (no vDSO for this clock), so read
 * only around a kick, at most once per notifier call. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    SYSC(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts));
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

void instr_kick(int efd)
{
    if (!instr_on()) {
        efd_kick(efd);
        return;
    }
    uint64_t w0 = now_ns();
    uint64_t c0 = thread_cpu_ns();
    efd_kick(efd);
    hist_add(&instr_ts->in->ops[OP_KICK], thread_cpu_ns() - c0);
    instr_ts->in->kick_wall_ns += now_ns() - w0;
}

struct tinstr *tinstr_new(void)
{
    struct tinstr *in = calloc(1, sizeof(*in));
    if (in == NULL)
        return NULL;
    for (int i = 0; i < OP_COUNT; i++)
        hist_init(&in->ops[i]);
    return in;
}

void tinstr_merge(struct tinstr *dst, const struct tinstr *src)
{
    for (int o = 0; o < OP_COUNT; o++)
        hist_merge(&dst->ops[o], &src->ops[o]);
    dst->calls += src->calls;
    dst->events += src->events;
    if (src->events_max > dst->events_max)
        dst->events_max = src->events_max;
    for (int b = 0; b <= MAX_EVENTS; b++) {
        dst->by_events_n[b] += src->by_events_n[b];
        dst->by_events_ns[b] += src->by_events_ns[b];
    }
}

void tstat_merge(struct tstat *dst, const struct tstat *src)
{
    dst->messages += src->messages;
    dst->accepted += src->accepted;
    dst->closed += src->closed;
    dst->stalled += src->stalled;
    dst->syscalls += src->syscalls;
    dst->user_s += src->user_s;
    dst->sys_s += src->sys_s;
    dst->wait_s = dst->wait_s < 0 || src->wait_s < 0 ? -1.0 : dst->wait_s + src->wait_s;
    dst->sleeps = dst->sleeps < 0 || src->sleeps < 0 ? -1 : dst->sleeps + src->sleeps;
    if (dst->in != NULL && src->in != NULL)
        tinstr_merge(dst->in, src->in);
}

void tstat_close(struct tstat *ts)
{
    thread_cpu_times(&ts->user_s, &ts->sys_s);
    ts->wait_s = thread_wait_s();
    ts->sleeps = thread_sleeps();
    ts->syscalls = sysc_mine();
    sysc_end();
}

void instr_wait_events(int nevents)
{
    struct tinstr *in = instr_ts->in;
    if (in == NULL)
        return;
    in->calls++;
    in->events += (uint64_t)nevents;
    if ((uint64_t)nevents > in->events_max)
        in->events_max = (uint64_t)nevents;
}

/* Callers never take more than MAX_EVENTS per call, so every bucket is an exact count. */
void instr_notify(uint64_t t0, int nevents)
{
    struct tinstr *in = instr_ts->in;
    if (in == NULL)
        return;
    uint64_t dt = now_ns() - t0;
    hist_add(&in->ops[OP_NOTIFY], dt);
    instr_wait_events(nevents);
    if (nevents > 0) {
        int b = nevents > MAX_EVENTS ? MAX_EVENTS : nevents;
        in->by_events_n[b]++;
        in->by_events_ns[b] += dt;
    }
}
