/* arrivals.c -- Poisson arrival times for demux-client's open loop (arrivals.h). */
#include "arrivals.h"

uint64_t arrival_rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* Natural log for x in (0, 1], without libm: x = m * 2^e with m in
 * [sqrt(1/2), sqrt(2)), ln m = 2 atanh((m-1)/(m+1)) as a short odd series. */
static double ln_unit(double x)
{
    union {
        double d;
        uint64_t u;
    } b = {.d = x};
    int e = (int)((b.u >> 52) & 0x7ff) - 1023;
    b.u = (b.u & ~(UINT64_C(0x7ff) << 52)) | (UINT64_C(1023) << 52);
    double m = b.d;
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double z = (m - 1.0) / (m + 1.0), z2 = z * z, term = z, sum = 0.0;
    for (int k = 1; k <= 21; k += 2) {
        sum += term / k;
        term *= z2;
    }
    return 2.0 * sum + e * 0.6931471805599453;
}

double arrival_unit_exp(uint64_t *rng)
{
    double u = (double)((arrival_rng_next(rng) >> 11) + 1) * 0x1.0p-53; /* (0, 1] */
    double x = -ln_unit(u);
    return x > 0.0 ? x : 0.0; /* ln 1 = 0 may come out as -0 or a rounding below */
}

void arrival_advance(struct arrival *a, double mean_ns)
{
    if (a->at == ARRIVAL_NEVER)
        return;
    double gap = arrival_unit_exp(&a->rng) * mean_ns + a->frac;
    uint64_t room = ARRIVAL_NEVER - a->at;
    /* Written so that NaN (0 x inf) and inf fail the test too; the conversion below is then
     * defined (gap < 2^64), and the integer comparison catches a room the double rounded up. */
    if (!(gap < (double)room)) {
        a->at = ARRIVAL_NEVER;
        a->frac = 0.0;
        return;
    }
    uint64_t whole = (uint64_t)gap;
    if (whole >= room) {
        a->at = ARRIVAL_NEVER;
        a->frac = 0.0;
        return;
    }
    a->at += whole;
    a->frac = gap - (double)whole; /* exact: in [0, 1), and 0 once gaps outgrow 2^52 ns */
}
