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

#include "hist.h"
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
};

/* One per process; read-only once the workers start, except the failure slot. */
struct run {
    const struct options *opt;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    const uint8_t *pattern; /* msg_size + PATTERN_PERIOD bytes, byte i = i % PATTERN_PERIOD */
    uint64_t t0, warm_end;
    /* Atomic: with --progress, SIGUSR1 moves both earlier while the workers run. */
    _Atomic uint64_t meas_end, end;
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
    uint64_t start_ns;     /* send time (closed) or intended send time (open) */
    uint64_t progress_ns;  /* last time bytes moved, for stall detection */
    uint64_t next_arrival; /* open loop: intended time of the next request */
    uint64_t rng;
};

struct worker {
    int index;
    struct run *run;
    pthread_t tid;
    int ep;
    struct conn *conns;
    uint32_t nconns;
    struct conn **heap; /* open loop: idle connections keyed by next_arrival */
    uint32_t heap_len;
    uint8_t *rbuf;
    size_t rbuf_size;
    uint64_t messages;  /* completed inside the measure phase */
    uint64_t offered;   /* open loop: arrivals intended inside the measure phase */
    uint64_t served;    /* open loop: of those, echoed before the run ended */
    uint64_t *per_sec;  /* run->nseconds counters (written by the worker only, read live by --progress) */
    uint64_t calls;     /* epoll waits begun inside the measure phase */
    double cpu_start_user, cpu_start_sys, cpu_end_user, cpu_end_sys;
    double wait_start, wait_end; /* runnable, waiting for a CPU (thread_wait_s; < 0: unknown) */
    long sleeps_start, sleeps_end; /* voluntary context switches (thread_sleeps; < 0: unknown) */
    int cpu_started, cpu_ended;
    struct hist lat; /* ns, measure phase only */
};

/* worker.c */
void *worker_main(void *arg);
void run_fail(struct run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
