/* median_ci.c -- see median_ci.h. */
#include "median_ci.h"

#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* P(Binomial(n, 1/2) <= j), summed term by term (n is a few dozen). */
static double binom_half_cdf(int n, int j)
{
    double term = 1.0, sum = 0.0;   /* C(n, i), before the 2^-n */
    for (int i = 0; i <= j; i++) {
        sum += term;
        term = term * (double)(n - i) / (double)(i + 1);
    }
    double scale = 1.0;
    for (int i = 0; i < n; i++) scale *= 0.5;
    return sum * scale;
}

double median_of(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

void median_ci_of(double *v, int n, double level, median_ci *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n <= 0) return;
    out->median = median_of(v, n);
    for (int k = 1; k <= (n + 1) / 2; k++) {
        double coverage = 1.0 - 2.0 * binom_half_cdf(n, k - 1);
        if (coverage < level) break;
        out->k = k;
        out->coverage = coverage;
        out->lo = v[k - 1];
        out->hi = v[n - k];
    }
}

int median_ci_side(const median_ci *ci, double target)
{
    if (!ci->k) return 0;
    if (target > ci->hi) return 1;
    if (target < ci->lo) return -1;
    return 0;
}
