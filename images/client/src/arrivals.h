/* arrivals.h -- the open loop's arrival times: each connection a Poisson source, its
 * exponential gaps drawn from a seeded generator and added to a nanosecond clock
 * without losing the fractions of a nanosecond, and without overflow. */
#ifndef DEMUXLAB_ARRIVALS_H
#define DEMUXLAB_ARRIVALS_H

#include <stdint.h>

/* A time no run reaches: where a gap would carry an arrival past the clock's range. */
#define ARRIVAL_NEVER UINT64_MAX

/* xorshift64*: cheap, and good enough to space arrivals; *s must not be 0. */
uint64_t arrival_rng_next(uint64_t *s);

/* A unit-mean exponential variate, -ln(u) for u uniform in (0, 1]: finite, 0..37. */
double arrival_unit_exp(uint64_t *rng);

/* One arrival stream: the next arrival at + frac ns (frac in [0, 1), the part of a
 * nanosecond the clock cannot hold, carried to the next gap so none is lost). */
struct arrival {
    uint64_t at;
    double frac;
    uint64_t rng;
};

/* Moves a to its next arrival, one exponential gap of mean mean_ns later (mean_ns > 0;
 * +inf or a gap past the clock's range gives ARRIVAL_NEVER, and NEVER stays NEVER). */
void arrival_advance(struct arrival *a, double mean_ns);

#endif
