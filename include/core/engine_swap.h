/* engine_swap.h -- swaps of beds by mutual request (contract 9.3): what
 * the shell needs besides engine_decide().
 *
 * `{"op":"swap","with":v}` from u: when v has an open offer to u, the two
 * beds are exchanged in one step and both requests are granted with their
 * new room; otherwise u's offer is recorded and its result is `waiting`.
 * An open offer ends -- its `waiting` result replaced exactly once -- when
 * it is answered (granted), when either holder's bed goes by release,
 * switch or another swap (rejected/not_holding), or when the batch closes
 * (rejected/closed). Those later results are drained like events
 * (engine_swap_resolved_*), for the transaction of the chunk that caused
 * them. Open offers are part of the offerer's holders entry, so they are
 * written and loaded with it.
 */
#ifndef ALLOCD_ENGINE_SWAP_H
#define ALLOCD_ENGINE_SWAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"

/* Open offers one user may have made at once; one more is `limit`. */
#define ENGINE_SWAP_OFFERS_MAX 8

/* An open offer, as the offerer's holders entry lists it. */
/* A pool request's place in the opening draw and its points (9.1, 11.3),
 * carried as engine_request carries them: an early swap that waits as an
 * offer keeps them into the result that replaces its `waiting`. */
typedef struct engine_swap_drawn {
    int64_t draw, points;   /* draw 0: not drawn */
    int has_points;
} engine_swap_drawn;

typedef struct engine_swap_offer {
    const char *req;        /* the swap request's id */
    const char *with;
    int64_t seq;
    engine_swap_drawn drawn;
} engine_swap_offer;

/* A `waiting` result replaced since the last drain. */
typedef struct engine_swap_resolved {
    const char *req, *user;
    int64_t seq;
    engine_result res;
    engine_swap_drawn drawn;
} engine_swap_resolved;

/* The open offers user made, oldest first: up to max into out; returns how
 * many there are. */
size_t engine_swap_offers_of(const engine *e, const char *user, engine_swap_offer *out, size_t max);
size_t engine_swap_open_count(const engine *e);
size_t engine_swap_resolved_count(const engine *e);
void engine_swap_resolved_at(const engine *e, size_t i, engine_swap_resolved *out);
/* Loading: an open offer of a loaded holder (o->req, with, seq and
 * drawn). 0, -EINVAL, -ENOMEM. */
int engine_load_swap_offer(engine *e, const char *user, const engine_swap_offer *o);

#endif
