/* test_arrivals.c -- unit test of client/src/arrivals.c; prints "ok" and exits 0, or names the first
 * failed check and exits 1.  Built with -fsanitize=undefined,float-cast-overflow by
 * tests/images/test_client_arrivals.py, so a gap converted past the clock's range is caught too. */
#include "arrivals.h"

#include <math.h>
#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                               \
        }                                                                             \
    } while (0)

/* Gaps far beyond the clock's range end the stream (ARRIVAL_NEVER), never wrap, and stay there. */
static void test_huge_gaps(void)
{
    const double means[] = {1e19, 1e25, 1e300, INFINITY};
    for (size_t m = 0; m < sizeof(means) / sizeof(means[0]); m++) {
        struct arrival a = {.at = 1000, .frac = 0.0, .rng = 0x1234567u + m};
        int wrapped = 0, bad_frac = 0;
        for (int i = 0; i < 1000 && a.at != ARRIVAL_NEVER && !wrapped; i++) {
            uint64_t before = a.at;
            arrival_advance(&a, means[m]);
            wrapped = a.at < before; /* past 2^64 */
            bad_frac |= !(a.frac >= 0.0 && a.frac < 1.0);
        }
        CHECK(!wrapped);
        CHECK(!bad_frac);
        CHECK(a.at == ARRIVAL_NEVER);
        arrival_advance(&a, 1.0);
        CHECK(a.at == ARRIVAL_NEVER);
    }
    /* Near the top of the range: an ordinary gap that does not fit saturates too. */
    struct arrival a = {.at = ARRIVAL_NEVER - 5, .frac = 0.0, .rng = 99};
    int wrapped = 0;
    for (int i = 0; i < 100 && a.at != ARRIVAL_NEVER && !wrapped; i++) {
        uint64_t before = a.at;
        arrival_advance(&a, 100.0);
        wrapped = a.at < before;
    }
    CHECK(!wrapped);
    CHECK(a.at == ARRIVAL_NEVER);
}

/* Gaps shorter than a nanosecond or a few long are not rounded down: a million of mean 2.5 ns add up
 * to 2.5 ms (within 5 standard deviations of their sum, 5 * sqrt(n) * mean = 12.5 us), where dropping
 * each gap's fraction would lose 0.5 ms. */
static void test_no_time_lost_to_rounding(void)
{
    const double mean = 2.5;
    const int n = 1000000;
    struct arrival a = {.at = UINT64_C(1) << 40, .frac = 0.0, .rng = 42};
    uint64_t start = a.at;
    for (int i = 0; i < n; i++)
        arrival_advance(&a, mean);
    double total = (double)(a.at - start) + a.frac;
    CHECK(fabs(total - n * mean) < 5.0 * sqrt((double)n) * mean);
}

/* The variate itself: finite, non-negative, unit mean. */
static void test_unit_exponential(void)
{
    uint64_t rng = 7;
    double sum = 0.0, lo = INFINITY, hi = 0.0;
    const int n = 1000000;
    for (int i = 0; i < n; i++) {
        double x = arrival_unit_exp(&rng);
        sum += x;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    CHECK(lo >= 0.0 && hi < 37.0);
    CHECK(fabs(sum / n - 1.0) < 0.01);
}

int main(void)
{
    test_huge_gaps();
    test_no_time_lost_to_rounding();
    test_unit_exponential();
    if (failures)
        return 1;
    puts("ok");
    return 0;
}
