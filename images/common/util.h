/* util.h -- clocks, CPU pinning, CPU-time accounting and strict number parsing
 * shared by demux-server, demux-client and the benchmark helpers. */
#ifndef DEMUXLAB_UTIL_H
#define DEMUXLAB_UTIL_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* Parses "0-3,8" into cpus[] in the written order; returns the count, or -1 on
 * bad syntax, a descending range, a CPU >= CPU_SETSIZE, or more than max CPUs. */
int parse_cpu_list(const char *s, int *cpus, int max);

/* Pins the calling thread to one CPU; 0 on success, -1 with errno set. */
int pin_self_to_cpu(int cpu);

/* User and system CPU seconds of the whole process / of the calling thread. */
void cpu_times(double *user_s, double *sys_s);
void thread_cpu_times(double *user_s, double *sys_s);

/* The calling thread's time runnable but waiting for a CPU, in seconds (the kernel's run_delay,
 * /proc/thread-self/schedstat); -1 where the kernel does not say. */
double thread_wait_s(void);
/* The calling thread's voluntary context switches so far (getrusage's
 * ru_nvcsw): each time it blocked, in a notifier, on a lock, a queue or a
 * socket, and so each time something had to wake it; < 0: unknown. */
long thread_sleeps(void);

/* Strict parsers: the whole string must be a number within [min, max].
 * parse_u64 takes decimal digits only (no sign, no spaces); parse_double takes
 * a finite strtod number.  0 on success, -1 (and *out untouched) otherwise. */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int parse_double(const char *s, double min, double max, double *out);

/* Busy-waits us microseconds on the monotonic clock; never sleeps, so it models
 * CPU-bound work without a context switch. */
void spin_us(double us);

#endif
