/* util.c -- see util.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util.h"

#include "sysc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* Reads a CPU number; the digits-only rule keeps "+1" and " 1" out. */
static int read_cpu(const char **p, int *out)
{
    const char *s = *p;
    long v = 0;
    if (*s < '0' || *s > '9')
        return -1;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v >= CPU_SETSIZE)
            return -1;
        s++;
    }
    *out = (int)v;
    *p = s;
    return 0;
}

int parse_cpu_list(const char *s, int *cpus, int max)
{
    int n = 0;
    if (s == NULL || *s == '\0')
        return -1;
    for (;;) {
        int lo, hi;
        if (read_cpu(&s, &lo) < 0)
            return -1;
        hi = lo;
        if (*s == '-') {
            s++;
            if (read_cpu(&s, &hi) < 0 || hi < lo)
                return -1;
        }
        for (int c = lo; c <= hi; c++) {
            if (n >= max)
                return -1;
            cpus[n++] = c;
        }
        if (*s == '\0')
            return n;
        if (*s != ',')
            return -1;
        s++;
    }
}

int pin_self_to_cpu(int cpu)
{
    cpu_set_t set;
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
        errno = EINVAL;
        return -1;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = SYSC(pthread_setaffinity_np(pthread_self(), sizeof(set), &set));
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

static void usage_times(int who, double *user_s, double *sys_s)
{
    struct rusage ru;
    if (SYSC(getrusage(who, &ru)) != 0) {
        *user_s = 0.0;
        *sys_s = 0.0;
        return;
    }
    *user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    *sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

void cpu_times(double *user_s, double *sys_s) { usage_times(RUSAGE_SELF, user_s, sys_s); }
void thread_cpu_times(double *user_s, double *sys_s) { usage_times(RUSAGE_THREAD, user_s, sys_s); }

long thread_sleeps(void)
{
    struct rusage ru;
    return SYSC(getrusage(RUSAGE_THREAD, &ru)) == 0 ? ru.ru_nvcsw : -1;
}

double thread_wait_s(void)
{
    char buf[96];
    int fd = SYSC(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC));
    if (fd < 0)
        return -1.0;
    ssize_t n = SYSC(read(fd, buf, sizeof(buf) - 1));
    SYSC(close(fd));
    if (n <= 0)
        return -1.0;
    buf[n] = '\0';
    unsigned long long on_cpu, waited;
    if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2)
        return -1.0;
    return (double)waited / 1e9;
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (s == NULL || *s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int parse_double(const char *s, double min, double max, double *out)
{
    char *end;
    /* strtod would skip leading blanks; a strict parser must not. */
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause(); /* eases the sibling hyper-thread while spinning */
#endif
}

void spin_us(double us)
{
    if (!(us > 0.0))
        return;
    uint64_t end = now_ns() + (uint64_t)(us * 1000.0);
    while (now_ns() < end)
        cpu_relax();
}

#define GAP_STEPS 257
#define GAP_MIN_NS 1000u
#define GAP_MAX_NS 100000u

static uint64_t gap_ns;
static pthread_once_t gap_once = PTHREAD_ONCE_INIT;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The loop's own step, as spin_cpu_us runs it: a median is untouched by the few steps a preemption or an
 * interrupt stretches. */
static void gap_calibrate(void)
{
    uint64_t step[GAP_STEPS];
    uint64_t prev = now_ns();
    for (int i = 0; i < GAP_STEPS; i++) {
        cpu_relax();
        uint64_t t = now_ns();
        step[i] = t - prev;
        prev = t;
    }
    qsort(step, GAP_STEPS, sizeof(step[0]), cmp_u64);
    uint64_t g = 16 * step[GAP_STEPS / 2];
    gap_ns = g < GAP_MIN_NS ? GAP_MIN_NS : g > GAP_MAX_NS ? GAP_MAX_NS : g;
}

uint64_t spin_gap_ns(void)
{
    pthread_once(&gap_once, gap_calibrate);
    return gap_ns;
}

uint64_t spin_cpu_us(double us)
{
    if (!(us > 0.0))
        return 0;
    uint64_t gap = spin_gap_ns();
    uint64_t want = (uint64_t)(us * 1000.0);
    uint64_t on = 0, prev = now_ns();
    while (on < want) {
        cpu_relax();
        uint64_t t = now_ns();
        uint64_t step = t - prev;
        prev = t;
        if (step < gap)
            on += step;
    }
    return on;
}
