/* conn.h -- connections: the table they live in, the protocol every pattern
 * shares (read a whole B-byte message, spin W us, echo it back), accept, and
 * the ownership rules of a connection that passes between threads. */
#ifndef DEMUX_CONN_H
#define DEMUX_CONN_H

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
    uint32_t sent; /* uring patterns: bytes of the echo sent */
    /* Edge-triggered notifiers: the read that completed the last message left
     * the socket empty (TCP_INQ said so), and the claim count seen before it
     * (the proactor's handler skips its first drain on that, see proactor.c). */
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

struct conn *conn_open(struct conn_table *t, int fd);
void conn_close(struct conn_table *t, struct conn *c);
enum rd conn_read(struct conn_table *t, struct conn *c);
/* conn_read for edge-triggered notifiers: sets c->drained when the kernel
 * reports (TCP_INQ) that nothing is left to read after the message, so a
 * drain ends without the read that would return EAGAIN; RD_AGAIN may then
 * come from that report instead of EAGAIN. */
enum rd conn_read_edge(struct conn_table *t, struct conn *c);
int conn_respond(struct conn_table *t, struct conn *c);
/* The message's work: W us of spinning, timed as `work`. */
void conn_work(const struct conn_table *t);

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
void conn_drain(struct conn_table *t, struct conn *c);

/* Claim protocol for edge-triggered notifiers, see struct conn. */
bool conn_claim(struct conn *c);
bool conn_release(struct conn *c, int *seen);

#endif
