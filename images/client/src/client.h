/* client.h -- the state shared by demux-client's option parsing, its worker
 * threads and its report writer. */
#ifndef DEMUXLAB_CLIENT_H
#define DEMUXLAB_CLIENT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "arrivals.h"
#include "hist.h"
#include "sysc.h"
#include "demux_limits.h"

#define CLIENT_MAX_CPUS DEMUX_MAX_CPUS
#define CLIENT_MAX_THREADS DEMUX_CLIENT_MAX_THREADS
#define CLIENT_MAX_CONNS DEMUX_CLIENT_MAX_CONNS
#define CLIENT_MAX_MSG ((unsigned)DEMUX_CLIENT_MAX_MSG)
/* A prime period makes consecutive messages and neighbouring connections differ. */
#define PATTERN_PERIOD 251u

struct options {
    const char *host;
    uint16_t port;
    uint32_t connections;
    uint32_t threads;
    uint32_t msg_size;
    double warmup_s, duration_s, cooldown_s;
    double rate; /* messages/s over all connections; 0 = closed loop */
    double stall_timeout_s;
    const char *json_path;
    int cpus[CLIENT_MAX_CPUS];
    int ncpus;
    int progress; /* --progress: print each measured second, end the measure phase early on SIGUSR1 */
    int phase_events; /* --phase-events: print the measure phase's start and end as they pass */
};

/* One per process; read-only once the workers start, except the failure slot and,
 * with --progress, what an early stop moves (meas_end, end, sealed). */
struct run {
    const struct options *opt;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    const uint8_t *pattern; /* msg_size + PATTERN_PERIOD bytes, byte i = i % PATTERN_PERIOD */
    uint64_t t0, warm_end;
    uint64_t meas_end0;     /* the measure phase's end as planned: where the books' last sample falls */
    double mean_gap_ns;     /* open loop: each connection's mean gap between arrivals */
    /* Atomic: with --progress, SIGUSR1 moves both earlier while the workers run. */
    _Atomic uint64_t meas_end, end;
    /* Seconds of the measure phase an early stop can no longer cut (those --progress printed; all of
     * them without --progress): a worker adds what starts in them to its totals at once, and keeps the
     * rest apart per second until they are (struct worker, pend). */
    _Atomic uint32_t sealed;
    uint32_t nseconds; /* whole seconds of the measure phase counted in per_sec (>= 1) */
    uint32_t reported; /* seconds reported in per_second: nseconds, fewer when stopped early */
    int stopped_early;
    pthread_barrier_t connected, started;
    atomic_int failed;
    pthread_mutex_t reason_lock;
    char reason[512];
};

struct conn {
    int fd;
    uint32_t id;       /* global connection number, names it in errors */
    uint32_t off;      /* pattern offset of the message in flight */
    uint32_t heap_pos; /* open loop: index in the idle heap, UINT32_MAX when absent */
    int busy;          /* a message is in flight */
    int want_out;      /* EPOLLOUT is armed because a send was partial */
    uint64_t seq;      /* messages completed on this connection */
    uint64_t sent, recvd;
    uint64_t start_ns;    /* intended send time (open), send time (closed) */
    uint64_t free_ns;     /* when its last echo completed: the earliest its next message could leave */
    uint64_t progress_ns; /* last time bytes moved, for stall detection */
    struct arrival arr;   /* open loop: intended time of the next request */
};

/* A worker's latency histograms (ns): of the echoes (completion - intended start) and of its sends
 * (actual - intended send time, open loop). */
struct hists {
    struct hist lat, late;
};

/* A worker's cumulative books, sampled at each whole second of the measure phase. */
struct books {
    double user, sys;  /* thread CPU seconds */
    double wait;       /* runnable, waiting for a CPU (thread_wait_s; < 0: unknown) */
    long sleeps;       /* voluntary context switches (thread_sleeps; < 0: unknown) */
    uint64_t calls;    /* epoll waits begun (the spin's non-blocking polls not counted) */
    uint64_t syscalls; /* the system calls it made so far (sysc.h) */
    uint64_t spin_ns;  /* open loop: time spent spinning to a due arrival */
};

struct worker {
    int index;
    struct run *run;
    pthread_t tid;
    int ep;
    struct conn *conns;
    uint32_t nconns;
    struct conn **heap; /* open loop: idle connections keyed by arr.at */
    uint32_t heap_len;
    uint8_t *rbuf;
    size_t rbuf_size;
    /* Per second of intended start (index nseconds: the part of a second past the last whole one). */
    uint64_t *per_sec;     /* echoes of the population (written by the worker only, read live by --progress) */
    uint64_t *offered_sec; /* open loop: arrivals intended */
    struct hists tot;      /* the sealed seconds' histograms */
    struct hists **pend;   /* an unsealed second's, NULL until used; folded into tot once sealed */
    uint32_t folded;       /* seconds below this are in tot */
    /* books[k]: at warm_end + k s, books[nseconds] at meas_end0; nbooks taken so far. */
    struct books *books;
    uint32_t nbooks;
    uint64_t calls, spin_ns;
    uint64_t gap_bins[GAP_BINS]; /* open loop: the intended gaps of the measure phase's arrivals (arrivals.h) */
    int64_t margin_ns; /* open loop: how long before a due arrival the sleep ends and the spin begins */
    uint32_t slack_div; /* the kernel's timer slack for a sleep of t is at least t / slack_div */
};

/* worker.c */
void *worker_main(void *arg);
void run_fail(struct run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
