/* conn.h -- connections: the table they live in, the protocol every pattern
 * shares (read a whole B-byte message, spin W us, echo it back), accept, the
 * wait of a reply its connection will not take (parking, the stall sweep), and
 * the ownership rules of a connection that passes between threads. */
#ifndef DEMUX_CONN_H
#define DEMUX_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "notifier.h"

/* Slots are indexed by descriptor and live until exit, so a late event for a
 * closed descriptor never touches freed memory. */
struct conn {
    int fd;
    uint32_t have; /* bytes of the current message received */
    uint32_t sent; /* bytes of the echo handed to the kernel so far */
    /* Readiness patterns: the echo is partly sent and the socket is full; the
     * connection is parked (see conn_park) until the notifier reports it
     * writable.  Owner state, like `have`. */
    bool wblocked;
    /* Edge-triggered notifiers: the read that completed the last message left
     * the socket empty (TCP_INQ said so), and the claim count seen before it
     * (the proactor's handler lets go of the connection on that, instead of
     * giving it back to the demultiplexer to read, see proactor.c). */
    bool drained;
    int claims_seen;
    char *buf;
    struct notifier *nt;
    /* Edge-triggered notifiers with several handler threads: events for one
     * connection may overlap, so the first claimant owns it and later ones
     * only leave a mark for the owner to loop on. */
    atomic_int claims;
    atomic_bool live;
    /* Hand-offs between threads, see conn_handoff(); odd while an arming
     * call (add or re-arm) is in flight, see conn_arming(). */
    atomic_uint handoff;
    /* Cold: a parked connection's.  When it has stalled (CLOCK_MONOTONIC ns), written by its owner
     * before it is listed; and the parked list (struct conn_table), guarded by its lock. */
    uint64_t stall_at;
    struct conn *park_prev, *park_next;
    bool parked; /* on the list */
    bool swept;  /* the sweep shut its socket down: it has stalled */
};

/* The connection table, the listener, and the stop flag every loop checks. */
struct conn_table {
    const struct config *cfg; /* msg_size, work_us, and blocking I/O for notifier none */
    int lfd;
    int reserve_fd; /* spent on the backlog when out of descriptors */
    int nslots;
    int max_conns;
    struct conn *slots;
    atomic_int open;
    atomic_bool stop;
    /* Connections waiting for writability (conn_park), for the stall sweep. */
    pthread_mutex_t park_lock;
    struct conn *parked;
};

static inline bool conns_stopping(const struct conn_table *t)
{
    return atomic_load_explicit(&t->stop, memory_order_relaxed);
}

static inline struct conn *conn_at(struct conn_table *t, int fd)
{
    return &t->slots[fd];
}

/* Ownership of a connection passes between threads through the kernel (a
 * re-arm or submission here, the event or completion there), an order the C
 * memory model, and so TSan, cannot see.  This release/acquire pair states it.
 * The release is a read-modify-write, not a store: a store would replace what
 * earlier releases published, and a late one (a thread that re-armed, was
 * preempted, and only then ran its second hand-off while the connection had
 * already passed through another thread) would hide that thread's accesses
 * from the next owner -- TSan then reports a race the kernel's ordering rules
 * out.  An RMW continues the release sequence instead (x86: one locked add).
 * A plain hand-off adds 2, so the count stays even outside arming calls. */
static inline void conn_handoff(struct conn *c)
{
    atomic_fetch_add_explicit(&c->handoff, 2, memory_order_release);
}

static inline void conn_takeover(struct conn *c)
{
    (void)atomic_load_explicit(&c->handoff, memory_order_acquire);
}

/* An arming call (the notifier's add or re-arm) hands the connection over
 * while it runs: the kernel reports the descriptor as soon as it is armed, so
 * the next owner may read EOF and close it before the call has returned.  The
 * call is bracketed by two hand-offs of 1 each -- the count is odd inside --
 * and conn_close() waits for it to be even: no call on a descriptor is in
 * flight in another thread when it is closed (and its number reused by the
 * next accept). */
static inline void conn_arming(struct conn *c)
{
    atomic_fetch_add_explicit(&c->handoff, 1, memory_order_release);
}

static inline bool conn_arming_in_flight(struct conn *c)
{
    return (atomic_load_explicit(&c->handoff, memory_order_acquire) & 1u) != 0;
}

enum rd { RD_MSG, RD_AGAIN, RD_CLOSED };
/* What handing a reply to the kernel came to: all of it (the message is counted), the socket is full
 * (the connection must be parked: conn_park), or the connection is done for (close it). */
enum wr { WR_DONE, WR_BLOCKED, WR_FAILED };

struct conn *conn_open(struct conn_table *t, int fd);
void conn_close(struct conn_table *t, struct conn *c);
enum rd conn_read(struct conn_table *t, struct conn *c);
/* conn_read for edge-triggered notifiers: sets c->drained when the kernel
 * reports (TCP_INQ) that nothing is left to read after the message, so a
 * drain ends without the read that would return EAGAIN; RD_AGAIN may then
 * come from that report instead of EAGAIN. */
enum rd conn_read_edge(struct conn_table *t, struct conn *c);
/* The message's work and its echo: conn_work, then conn_send. */
enum wr conn_respond(struct conn_table *t, struct conn *c);
/* Hands the rest of the echo to the kernel, never waiting: WR_DONE once its last byte is taken (the
 * message counts then, in every pattern), WR_BLOCKED when the socket is full (c->wblocked is set, and
 * c->stall_at unless nothing was sent since the last block: --stall-ms without progress), WR_FAILED. */
enum wr conn_send(struct conn_table *t, struct conn *c);
/* A parked connection's writability report (c->wblocked): it leaves the parked list and sends on; if the
 * sweep gave up on it, it is counted stalled (count_stalled) and WR_FAILED closes it with a reset. */
enum wr conn_resume(struct conn_table *t, struct conn *c);
/* After WR_BLOCKED: the connection goes on the parked list and is armed for writability (the notifier's
 * arm_write, a hand-off like a re-arm); it leaves only through conn_resume, and the notifier's loop
 * goes on serving the others.  If the arm fails the connection is closed. */
void conn_park(struct conn_table *t, struct notifier *nt, struct conn *c);
/* After conn_respond/conn_resume under a deactivating notifier: re-arms for reading (WR_DONE), parks
 * (WR_BLOCKED) or closes (WR_FAILED). */
void conn_replied(struct conn_table *t, struct notifier *nt, struct conn *c, enum wr r);
/* The message's work: W us of the thread's CPU (spin_cpu_us), timed as `work` (wall time, which shows
 * any preemption) and `work_cpu` (the CPU time the spin counted). */
void conn_work(const struct conn_table *t);

/* The parked list itself, for a pattern that waits for writability its own way (the uring patterns'
 * send backlog): a watched connection is shut down by the sweep once c->stall_at has passed; unwatching
 * it says whether the sweep gave up on it (then count it with count_stalled and close it).  The rule of
 * conns_sweep holds: a watched connection is unwatched before anything closes it. */
void conn_stall_watch(struct conn_table *t, struct conn *c);
bool conn_stall_unwatch(struct conn_table *t, struct conn *c);

/* The stall sweep (main's thread, between signals): every parked connection whose stall_at has passed
 * has its socket shut down, under the parked list's lock, so that the notifier reports it and its next
 * owner finds it swept (conn_resume).  A parked connection leaves the list before anything else is done
 * with it, so a connection on the list is never closed under the sweep.  Returns the ns until the next
 * deadline, at most stall_ms. */
uint64_t conns_sweep(struct conn_table *t);

/* Accepts until the backlog is empty; each new connection is passed to
 * place(), which registers it (or returns -1, and it is closed). */
void accept_all(struct conn_table *t, int (*place)(struct conn *c, void *arg), void *arg);
int accept_one(struct conn_table *t); /* the descriptor, or -1 when the backlog is empty */

/* Serves one readiness report for a connection (not the listener) the way the
 * notifier needs: one message then rearm for deactivating notifiers, read to
 * EAGAIN for edge-triggered ones (claim-guarded when `shared`). */
void conn_ready(struct conn_table *t, struct notifier *nt, struct conn *c, bool shared);
void conn_rearm(struct conn_table *t, struct notifier *nt, struct conn *c);
int conn_arm(struct conn *c, struct notifier *nt);
/* Edge-triggered: resumes a parked echo, then reads and answers until the socket is empty (or the reply
 * blocks: the connection is parked). */
void conn_drain(struct conn_table *t, struct notifier *nt, struct conn *c);

/* Claim protocol for edge-triggered notifiers, see struct conn. */
bool conn_claim(struct conn *c);
bool conn_release(struct conn *c, int *seen);

#endif
