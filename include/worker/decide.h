/* decide.h -- deciding a chunk: the engine's half of a chunk step.
 *
 * The worker decides a chunk in memory and then encodes what changed as
 * one transaction (worker/apply_txn.h). Deciding is only engine calls: each
 * request with a result gets its engine_result on its chunk item (or the
 * parser's `invalid`), and the chunk's status tallies grow. It writes no
 * RESP and touches no socket, so what the engine decided can be tested and
 * read apart from how it is written; the encoder then reads the items and
 * the engine's drained changes.
 */
#ifndef ALLOCD_DECIDE_H
#define ALLOCD_DECIDE_H

#include <stddef.h>
#include <stdint.h>

#include "core/engine.h"
#include "worker/chunk.h"

/* Decides items [from, to) of ch at `now` (ms), in order. A chunk may be
 * decided in slices, as long as they are consecutive and share `now`: the
 * worker feeds its socket in between. The first slice (from == 0) expires
 * the reservations due at `now` first, so a chunk without items still
 * records them. Dead and duplicate items are only counted. Check
 * engine_error() afterwards: after an allocation failure the results are
 * not to be written. */
void decide_chunk(chunk *ch, engine *e, int64_t now, size_t from, size_t to);

#endif
