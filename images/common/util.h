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

/* Busy-waits us microseconds of wall time on the monotonic clock; never sleeps.  For waits that are
 * about time passing (a benchmark letting a waiter settle), not for emulated work: a thread preempted
 * in the middle of it gets less than us of CPU. */
void spin_us(double us);

/* Emulated CPU-bound work: busy-waits until the calling thread has been on a CPU for us microseconds,
 * whatever the scheduler does meanwhile; never sleeps.  It spins on the monotonic clock (vDSO, no
 * system call) and counts only the steps between two consecutive reads that are shorter than a gap
 * threshold: a longer step is time off the CPU (a preemption, a migration, a stolen vCPU, a long
 * interrupt) and is not counted, so a preempted spin goes on until it has had its time.  The threshold
 * is calibrated once per process from the loop's own step (16 x its median, 1..100 us: far below a
 * context switch plus the run of whatever preempted it), so the thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
 * over the spin is the counted time plus the CPU time the gaps held (the switches back in), never less
 * but for interrupts shorter than the threshold.  Checked against that clock by
 * images/common/tests/test_common.c beside a thread that wakes on the same CPU.  Returns the on-CPU
 * nanoseconds it counted (>= us * 1000; 0 for us <= 0).  Chosen over spinning on
 * CLOCK_THREAD_CPUTIME_ID, a system call (~0.7 us a read on the 2-core VM, two or more per message,
 * about a microsecond more per message than this at W = 10 us), and over a loop of calibrated length
 * (no clock read, but 0.95-1.05 x W with the CPU's speed at the time). */
uint64_t spin_cpu_us(double us);
/* The gap threshold spin_cpu_us uses, in ns (calibrating it if not yet done). */
uint64_t spin_gap_ns(void);

#endif
