/* efd.h -- eventfd kicks, the wake-up of the notifiers, tpc's acceptor and the
 * uring threads' inboxes.  A failed write means the counter is already
 * non-zero, which wakes the waiter just the same. */
#ifndef DEMUX_EFD_H
#define DEMUX_EFD_H

#include <stdint.h>
#include <unistd.h>

#include "sysc.h"

static inline void efd_kick(int efd)
{
    uint64_t one = 1;
    ssize_t r = SYSC(write(efd, &one, sizeof(one)));
    (void)r;
}

static inline void efd_drain(int efd)
{
    uint64_t v;
    ssize_t r = SYSC(read(efd, &v, sizeof(v)));
    (void)r;
}

#endif
