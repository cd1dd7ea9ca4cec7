/* median_ci.h -- how far a median of paired ratios can be trusted
 * (allocbench's TARGET lines).
 *
 * A target is judged on the median of N paired rounds, and on this
 * 2-core machine one round's ratio moves by a third from the next. The
 * median alone does not say whether "1.38x, NOT MET" is below 1.5x or
 * only not shown to be above it. This module gives the order-statistic
 * interval [x(k), x(N+1-k)], which holds the true median with probability
 * 1 - 2 P(Binomial(N, 1/2) <= k - 1) whatever the ratios' distribution,
 * for the largest k that keeps that at least the level asked. Pure
 * computation: the caller prints it.
 */
#ifndef ALLOCBENCH_MEDIAN_CI_H
#define ALLOCBENCH_MEDIAN_CI_H

typedef struct median_ci {
    int n;
    double median;            /* median_of(v, n) */
    int k;                    /* the interval is [x(k), x(n+1-k)]; 0: none reaches the level */
    double lo, hi;
    double coverage;          /* its probability of holding the median; 0 when k = 0 */
} median_ci;

/* Sorts v[0..n) in place; v[n/2] (the upper of two middles), 0 when n = 0.
 * allocbench's medians, so every median it prints is taken alike. */
double median_of(double *v, int n);

/* Sorts v[0..n) in place and fills *out. level: e.g. 0.95. */
void median_ci_of(double *v, int n, double level, median_ci *out);

/* Where `target` stands against the interval: 1 above it (the median is
 * below the target at that confidence), -1 below it (the median is
 * above), 0 inside, or no interval. */
int median_ci_side(const median_ci *ci, double target);

#endif
