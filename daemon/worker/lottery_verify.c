/* lottery_verify.c -- see lottery_verify.h. The sentences are the ones
 * `allocctl lottery verify` prints after "DIFF "; the dashboard shows the
 * first of them. */
#include "worker/lottery_verify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct diffs {
    lottery_diff_fn fn;
    void *ud;
    size_t n;
} diffs;

static void diff(diffs *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void diff(diffs *d, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    d->n++;
    if (d->fn) d->fn(d->ud, msg);
}

/* draw_by=points (contract 11.3): the result's `points` must be the ones
 * recorded in the pool for its user's ticket, and absent without them. */
static void check_points(diffs *d, const lottery_pool *p, uint32_t i, const lottery_result *r)
{
    const lottery *l = &p->lot;
    const char *user = l->users[l->tickets[l->req_ticket[i]]].id, *id = p->reqs[i].id;
    int64_t want;
    int recorded = lottery_pool_points_of(p, user, &want);
    if (recorded && !r->has_points)
        diff(d, "%s: the draw recorded %" PRId64 " points for %s, the result has none", id, want, user);
    else if (recorded && r->points != want)
        diff(d, "%s: result says points %" PRId64 ", the draw recorded %" PRId64, id, r->points, want);
    else if (!recorded && (r->has_points || r->has_other_points))
        diff(d, "%s: result has points, but the draw recorded none", id);
}

size_t lottery_verify_results(const lottery_pool *p, const lottery_result *res, int64_t served,
                              lottery_diff_fn fn, void *ud)
{
    diffs d = { fn, ud, 0 };
    int64_t last_rank = 0;
    for (size_t k = 0; k < p->n; k++) {
        uint32_t i = p->serve[k];
        const lottery_result *r = &res[k];
        const char *id = p->reqs[i].id;
        if ((int64_t)k >= served) {
            if (r->has) diff(&d, "%s: answered, but the replay serves it after the %" PRId64 " served so far", id, served);
            continue;
        }
        if (!r->has) { diff(&d, "%s: served (position %zu) but has no result", id, k + 1); continue; }
        if (r->seq != p->reqs[i].seq) {
            /* the same id twice in the pool: the first one served was answered */
            if (r->draw == 0)
                diff(&d, "%s: its result is not the pool's (seq %" PRId64 ", pool seq %" PRId64 ")", id, r->seq,
                     p->reqs[i].seq);
            continue;
        }
        check_points(&d, p, i, r);
        if (r->draw != (int64_t)p->draw_pos[i])
            diff(&d, "%s: result says draw %" PRId64 ", the replay %u", id, r->draw, p->draw_pos[i]);
        /* a grant the waitlist made later, or a swap offer answered later,
         * comes after the draw's order by design (9.5, 9.3) */
        if (r->rank && !r->late) {
            if (r->rank <= last_rank)
                diff(&d, "%s: granted with rank %" PRId64 " after rank %" PRId64 ": not in the replayed order", id,
                     r->rank, last_rank);
            last_rank = r->rank;
        }
    }
    return d.n;
}
