/* test_common.c -- unit test of hist.c and util.c; prints "ok" and exits 0, or
 * names the first failed check and exits 1.  Kept outside the common sources so the
 * binaries that glob that directory do not link a second main(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RUSAGE_THREAD */
#endif
#include "hist.h"
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int failures;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                  \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static int within(uint64_t got, double want, double rel)
{
    return fabs((double)got - want) <= rel * want + 0.5;
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_hist_uniform(void)
{
    static struct hist h;
    hist_init(&h);
    for (uint64_t v = 1; v <= 1000000; v++)
        hist_add(&h, v);
    CHECK(hist_count(&h) == 1000000);
    CHECK(hist_max(&h) == 1000000);
    CHECK(hist_min(&h) == 1);
    CHECK(hist_total(&h) == UINT64_C(500000500000));
    CHECK(fabs(hist_mean(&h) - 500000.5) < 1e-6);
    const double ps[] = {1, 10, 50, 90, 99, 99.9, 99.99};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++)
        CHECK(within(hist_percentile(&h, ps[i]), ps[i] * 10000.0, 0.01));
    CHECK(hist_percentile(&h, 100) == 1000000);
    CHECK(hist_percentile(&h, 0) == 1);
}

/* Heavy-tailed random values compared with the exact order statistics. */
static void test_hist_random(void)
{
    enum { N = 200000 };
    static uint64_t vals[N];
    static struct hist a, b;
    uint64_t seed = 0x9e3779b97f4a7c15u;
    hist_init(&a);
    hist_init(&b);
    for (int i = 0; i < N; i++) {
        uint64_t r = xorshift(&seed);
        uint64_t v = (r & 0xffff) << (r >> 58 & 31); /* spans 0 .. ~2^47 */
        vals[i] = v;
        hist_add(i % 2 ? &a : &b, v);
    }
    hist_merge(&a, &b);
    CHECK(hist_count(&a) == N);
    qsort(vals, N, sizeof(vals[0]), cmp_u64);
    const double ps[] = {5, 25, 50, 75, 90, 99, 99.9};
    for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
        size_t rank = (size_t)ceil(ps[i] / 100.0 * N);
        uint64_t want = vals[rank - 1];
        if (want < HIST_CLAMP)
            CHECK(within(hist_percentile(&a, ps[i]), (double)want, 0.01));
    }
    CHECK(hist_max(&a) == vals[N - 1]);
    CHECK(hist_min(&a) == vals[0]);
}

static void test_hist_small_exact(void)
{
    struct hist h;
    hist_init(&h);
    CHECK(hist_percentile(&h, 50) == 0);
    CHECK(hist_max(&h) == 0 && hist_mean(&h) == 0.0);
    for (uint64_t v = 0; v < 100; v++)
        hist_add(&h, v);
    CHECK(hist_percentile(&h, 50) == 49);
    CHECK(hist_percentile(&h, 99) == 98);
    hist_add(&h, UINT64_MAX);
    CHECK(hist_max(&h) == UINT64_MAX);
    CHECK(hist_percentile(&h, 100) == UINT64_MAX);
}

static void test_parsers(void)
{
    int cpus[16];
    uint64_t u = 7;
    double d = 7;
    CHECK(parse_cpu_list("0-3,8", cpus, 16) == 5 && cpus[0] == 0 && cpus[3] == 3 && cpus[4] == 8);
    CHECK(parse_cpu_list("5", cpus, 16) == 1 && cpus[0] == 5);
    CHECK(parse_cpu_list("", cpus, 16) == -1);
    CHECK(parse_cpu_list("3-1", cpus, 16) == -1);
    CHECK(parse_cpu_list("1,", cpus, 16) == -1);
    CHECK(parse_cpu_list("a", cpus, 16) == -1);
    CHECK(parse_cpu_list("-1", cpus, 16) == -1);
    CHECK(parse_cpu_list("0-20", cpus, 16) == -1);
    CHECK(parse_cpu_list("99999", cpus, 16) == -1);
    CHECK(parse_u64("42", 1, 100, &u) == 0 && u == 42);
    CHECK(parse_u64("18446744073709551615", 0, UINT64_MAX, &u) == 0 && u == UINT64_MAX);
    CHECK(parse_u64("18446744073709551616", 0, UINT64_MAX, &u) == -1);
    CHECK(parse_u64("0", 1, 100, &u) == -1);
    CHECK(parse_u64("101", 1, 100, &u) == -1);
    CHECK(parse_u64("-1", 0, 100, &u) == -1);
    CHECK(parse_u64("+1", 0, 100, &u) == -1);
    CHECK(parse_u64(" 1", 0, 100, &u) == -1);
    CHECK(parse_u64("1x", 0, 100, &u) == -1);
    CHECK(parse_u64("", 0, 100, &u) == -1);
    CHECK(parse_double("2.5", 0, 10, &d) == 0 && d == 2.5);
    CHECK(parse_double("1e2", 0, 1000, &d) == 0 && d == 100.0);
    CHECK(parse_double("nan", 0, 10, &d) == -1);
    CHECK(parse_double("inf", 0, INFINITY, &d) == -1);
    CHECK(parse_double("-1", 0, 10, &d) == -1);
    CHECK(parse_double(" 1", 0, 10, &d) == -1);
    CHECK(parse_double("1 ", 0, 10, &d) == -1);
    CHECK(parse_double("", 0, 10, &d) == -1);
}

static void test_clock_and_spin(void)
{
    double u0, s0, u1, s1;
    struct rusage r0, r1;
    uint64_t t0 = now_ns();
    thread_cpu_times(&u0, &s0);
    getrusage(RUSAGE_THREAD, &r0);
    spin_us(20000.0);
    getrusage(RUSAGE_THREAD, &r1);
    uint64_t dt = now_ns() - t0;
    thread_cpu_times(&u1, &s1);
    CHECK(dt >= 20000000u);
    CHECK(dt < 2000000000u);
    /* Spinning burns CPU, a sleep would not: the thread ran, and never gave up
     * the CPU of its own accord (sleeping is a voluntary context switch; being
     * preempted on a loaded machine is not).  How much CPU it got in 20 ms of
     * wall time depends on that load, so no amount is asserted. */
    CHECK((u1 + s1) - (u0 + s0) > 0.0);
    CHECK(r1.ru_nvcsw == r0.ru_nvcsw);
    cpu_times(&u1, &s1);
    CHECK(u1 + s1 >= 0.005);
    CHECK(pin_self_to_cpu(-1) == -1);
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static atomic_bool waker_stop;

/* Busy 100 us, asleep 100 us, on the spinner's CPU: it preempts the spinner again and again. */
static void *waker(void *arg)
{
    pin_self_to_cpu(*(int *)arg);
    while (!atomic_load(&waker_stop)) {
        spin_us(100.0);
        struct timespec nap = {0, 100000};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

/* spin_cpu_us against the thread's CPU clock, beside threads that wake on its CPU: the spin's time is
 * CPU time (the wall-clock spin_us got a fraction of it there), and what it counted is never more. */
static void test_spin_cpu(void)
{
    CHECK(spin_cpu_us(0.0) == 0);
    CHECK(spin_cpu_us(-1.0) == 0);
    CHECK(spin_gap_ns() >= 1000 && spin_gap_ns() <= 100000);
    int cpu = sched_getcpu();
    CHECK(cpu >= 0 && pin_self_to_cpu(cpu) == 0);
    pthread_t w[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, waker, &cpu);
    for (int round = 0; round < 5; round++) {
        uint64_t c0 = thread_cpu_ns();
        uint64_t counted = spin_cpu_us(2000.0);
        uint64_t cpu_ns = thread_cpu_ns() - c0;
        CHECK(counted >= 2000000u);
        /* Interrupts shorter than the gap threshold are counted, and need not be the thread's: 3 %. */
        CHECK((double)cpu_ns >= 0.97 * (double)counted);
        CHECK((double)cpu_ns >= 0.97 * 2000000.0);
    }
    atomic_store(&waker_stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
}

int main(void)
{
    test_hist_uniform();
    test_hist_random();
    test_hist_small_exact();
    test_parsers();
    test_clock_and_spin();
    test_spin_cpu();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    puts("ok");
    return 0;
}
