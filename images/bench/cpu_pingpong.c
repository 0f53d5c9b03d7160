/* cpu_pingpong.c -- what handing a cache line from one CPU to another costs now:
 * the yardstick of the host's placement of its CPUs (bench/fidelity/ctmc_validation.py
 * measures it between the server's and the client's CPU around every run).
 *
 *   cpu-pingpong --cpus A,B [--rounds N]
 *
 * Two threads, pinned to CPU A and CPU B, pass a counter back and forth through
 * one cache line, spinning (no system call, no sleep): N round trips in 5
 * batches. Prints one JSON line:
 *   {"cpus": [A, B], "rounds": N, "round_trip_ns": median of the batches, "min_ns": fastest batch}
 *
 * On a virtual machine the round trip moves with where the hypervisor runs the
 * two virtual CPUs: on the 2-core VM of docs/ctmc-reference.md it is ~100-150 ns most of
 * the time and ~400 ns for minutes at a time, and an echo pair across the same
 * two CPUs then spends ~30 % more CPU per message on both sides. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helper_args.h"
#include "util.h"

#define BATCHES 5

static _Alignas(64) _Atomic uint64_t ball;
static _Atomic int gone; /* the second side could not pin itself and left */
static uint64_t rounds_per_batch;

struct side {
    int cpu;
    int err; /* errno of a failed pin */
};

/* The second CPU's side: answers every odd value with the next even one. */
static void *answer(void *arg)
{
    struct side *s = arg;
    if (pin_self_to_cpu(s->cpu) < 0) {
        s->err = errno;
        atomic_store(&gone, 1);
        return NULL;
    }
    uint64_t total = rounds_per_batch * BATCHES;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t want = 2 * i + 1;
        while (atomic_load_explicit(&ball, memory_order_acquire) != want)
            ;
        atomic_store_explicit(&ball, want + 1, memory_order_release);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const struct helper_args args = {"cpu-pingpong", "rounds", BATCHES, UINT64_C(1) << 32, "5 to 2^32"};
    int cpus[2];
    uint64_t rounds = 100000;
    int bad = parse_helper_args(&args, argc, argv, cpus, &rounds);
    if (bad)
        return bad;
    rounds_per_batch = rounds / BATCHES;

    struct side other = {.cpu = cpus[1], .err = 0};
    if (pin_self_to_cpu(cpus[0]) < 0) {
        fprintf(stderr, "cpu-pingpong: cannot pin to CPU %d: %s\n", cpus[0], strerror(errno));
        return 1;
    }
    pthread_t t;
    int rc = pthread_create(&t, NULL, answer, &other);
    if (rc != 0) {
        fprintf(stderr, "cpu-pingpong: cannot start a thread: %s\n", strerror(rc));
        return 1;
    }
    double batch_ns[BATCHES];
    uint64_t i = 0;
    int failed = 0;
    for (int b = 0; b < BATCHES && !failed; b++) {
        uint64_t t0 = now_ns();
        for (uint64_t k = 0; k < rounds_per_batch; k++, i++) {
            atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2)
                if (atomic_load_explicit(&gone, memory_order_relaxed)) {
                    failed = 1;
                    break;
                }
            if (failed)
                break;
        }
        batch_ns[b] = (double)(now_ns() - t0) / (double)rounds_per_batch;
    }
    pthread_join(t, NULL);
    if (failed) {
        fprintf(stderr, "cpu-pingpong: cannot pin to CPU %d: %s\n", cpus[1], strerror(other.err));
        return 1;
    }
    qsort(batch_ns, BATCHES, sizeof(batch_ns[0]), cmp_double);
    printf("{\"cpus\": [%d, %d], \"rounds\": %llu, \"round_trip_ns\": %.1f, \"min_ns\": %.1f}\n", cpus[0], cpus[1],
           (unsigned long long)(rounds_per_batch * BATCHES), batch_ns[BATCHES / 2], batch_ns[0]);
    return 0;
}
