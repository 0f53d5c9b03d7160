/* sysc.h -- the system calls a thread makes, counted where it makes them (issue 44).
 *
 * Each thread that counts registers a cell once (sysc_register: one allocation, under a lock, at the
 * thread's start); every call site the code names is then wrapped in SYSC(call), a plain increment of
 * the thread's own cell (a relaxed load and store: one owner writes it, so no locked instruction), and
 * another thread may read the cells while they count (sysc_cells: the list only grows; cells live until
 * the process exits, so an ended thread's calls stay in the total).
 *
 * What is counted: every system call the code makes by name (recv, send, epoll_wait, accept4, close,
 * eventfd reads and writes, ...), each liburing call counted as the system calls it enters the kernel
 * with (uring_sys.h decides that from the ring's state as liburing 2.3 does), and each condition-variable
 * wait as one futex wait and each signal sent to a waiter the code knows sleeps as one futex wake.  Not
 * counted: what libraries decide inside (a contended mutex's futex waits and wakes, a condition
 * variable's extra futex calls, malloc's mmap, printf's write), and a thread's calls before it
 * registered.  So a pattern whose threads hand work over (hsha, lf, the proactor, uring-shared) counts
 * fewer than the kernel: its locks' futexes.  A kernel-side count (the launchers' opt-in tracepoint)
 * sees those too. */
#ifndef DEMUX_SYSC_H
#define DEMUX_SYSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sysc_cell {
    _Atomic uint64_t n; /* the owner's calls so far */
    int tid;            /* the owner's kernel thread id */
    atomic_bool ended;  /* the owner has ended: its tid may be another thread's now */
    struct sysc_cell *next;
} __attribute__((aligned(64)));

extern _Thread_local struct sysc_cell *sysc_self;

/* The calling thread's cell, registered once (later calls return the same cell). Dies when out of
 * memory: a count that silently stopped would be a wrong count. */
struct sysc_cell *sysc_register(void);
/* The calling thread ends: its cell stays in the total but leaves the live list (sysc_cells). */
void sysc_end(void);

static inline void sysc_add(uint64_t k)
{
    struct sysc_cell *c = sysc_self;
    if (c != NULL)
        atomic_store_explicit(&c->n, atomic_load_explicit(&c->n, memory_order_relaxed) + k, memory_order_relaxed);
}

/* The calling thread's calls so far (0 before it registered). */
static inline uint64_t sysc_mine(void)
{
    return sysc_self != NULL ? atomic_load_explicit(&sysc_self->n, memory_order_relaxed) : 0;
}

static inline uint64_t sysc_of(const struct sysc_cell *c)
{
    return atomic_load_explicit(&c->n, memory_order_relaxed);
}

/* Every cell registered so far, newest first (walk ->next). */
struct sysc_cell *sysc_cells(void);
/* Every registered thread's calls so far, ended threads' included. */
uint64_t sysc_total(void);
/* The live threads' counts to ``out`` as JSON array items ({"tid": T, "syscalls": N}, comma-separated),
 * and every registered thread's total (sysc_total's, from the same reading): the server's SIGUSR1 line
 * and the client's phase events. */
uint64_t sysc_write_live(FILE *out);

/* One system call, counted: SYSC(recv(fd, buf, n, 0)). */
#define SYSC(call) (sysc_add(1), (call))

#endif
