/* hist.c -- see hist.h for the bucket layout and the error bound. */
#include "hist.h"

#include <string.h>

static unsigned index_of(uint64_t v)
{
    if (v < HIST_SUB_COUNT)
        return (unsigned)v;
    if (v > HIST_CLAMP)
        v = HIST_CLAMP;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - (HIST_SUB_BITS - 1); /* leaves v >> shift in [64, 127] */
    unsigned sub = (unsigned)(v >> shift) - HIST_HALF_COUNT;
    return HIST_SUB_COUNT + (shift - 1) * HIST_HALF_COUNT + sub;
}

/* The midpoint of a bucket halves the worst-case error compared with its lower edge. */
static uint64_t value_of(unsigned idx)
{
    if (idx < HIST_SUB_COUNT)
        return idx;
    unsigned rel = idx - HIST_SUB_COUNT;
    unsigned shift = rel / HIST_HALF_COUNT + 1;
    uint64_t sub = (uint64_t)(rel % HIST_HALF_COUNT) + HIST_HALF_COUNT;
    uint64_t lower = sub << shift;
    return lower + ((UINT64_C(1) << shift) >> 1);
}

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

void hist_add(struct hist *h, uint64_t v)
{
    h->buckets[index_of(v)]++;
    h->count++;
    h->total += v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    if (src->count == 0)
        return;
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->total += src->total;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    if (h->count == 0)
        return 0;
    if (!(p > 0.0))
        return h->min;
    if (p >= 100.0)
        return h->max;
    /* Nearest-rank definition: the smallest value with at least p% of samples at or below it. */
    double want = p / 100.0 * (double)h->count;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want || rank == 0)
        rank++; /* ceil without libm, so users need not link -lm */
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = value_of(i);
            if (v < h->min)
                v = h->min;
            if (v > h->max)
                v = h->max;
            return v;
        }
    }
    return h->max;
}

uint64_t hist_count(const struct hist *h) { return h->count; }
uint64_t hist_max(const struct hist *h) { return h->count ? h->max : 0; }
uint64_t hist_min(const struct hist *h) { return h->count ? h->min : 0; }
uint64_t hist_total(const struct hist *h) { return h->total; }

double hist_mean(const struct hist *h)
{
    return h->count ? (double)h->total / (double)h->count : 0.0;
}
