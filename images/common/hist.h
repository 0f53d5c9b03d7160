/* hist.h -- log-linear latency histogram (HdrHistogram-like), no allocation.
 *
 * Values below 128 are counted exactly; above, each power-of-two range is cut
 * into 64 equal sub-buckets and a percentile reports the sub-bucket midpoint,
 * so the reported value is within 1/128 (0.8%) of the true one.  Values at or
 * above HIST_CLAMP (about 4.9 hours in ns) share the last bucket; max, mean and
 * total stay exact.  The struct is a plain value: it may live on the stack, be
 * copied, or be merged across threads after they are joined. */
#ifndef DEMUXLAB_HIST_H
#define DEMUXLAB_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7                       /* 128 first-range buckets */
#define HIST_SUB_COUNT (1u << HIST_SUB_BITS)
#define HIST_HALF_COUNT (HIST_SUB_COUNT / 2)  /* 64 sub-buckets per octave */
#define HIST_MAX_BITS 44                      /* values >= 2^44 are clamped */
#define HIST_CLAMP ((UINT64_C(1) << HIST_MAX_BITS) - 1)
#define HIST_BUCKETS (HIST_SUB_COUNT + (HIST_MAX_BITS - HIST_SUB_BITS) * HIST_HALF_COUNT)

struct hist {
    uint64_t count;
    uint64_t total; /* sum of the values added (wraps only past 584 years of ns) */
    uint64_t min;
    uint64_t max;
    uint64_t buckets[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
void hist_merge(struct hist *dst, const struct hist *src);
/* p in 0..100; 0 gives the minimum, 100 the maximum, an empty histogram 0. */
uint64_t hist_percentile(const struct hist *h, double p);
uint64_t hist_count(const struct hist *h);
uint64_t hist_max(const struct hist *h);
uint64_t hist_min(const struct hist *h);
double hist_mean(const struct hist *h);
uint64_t hist_total(const struct hist *h);

#endif
