/* engine_groups_int.h -- groups formed by consent (engine_groups.c,
 * contract 9.2), for the engine's own files. Stands on engine_state.h and
 * engine_rooms (a group's grant seats its members there).
 */
#ifndef ALLOCD_ENGINE_GROUPS_INT_H
#define ALLOCD_ENGINE_GROUPS_INT_H

#include "core/engine.h"

engine_reason engine__groups_decide(engine *e, uint32_t ui, const engine_request *r,
                                    int64_t now, engine_result *out);
const char *engine__groups_user_group(const engine *e, uint32_t ui);
/* The members of user ui's formed group (members[0] leads), or 0 when the
 * user is in none. */
size_t engine__groups_members(const engine *e, uint32_t ui, const char *const **members);
void engine__groups_drain_clear(engine *e);
void engine__groups_free(engine *e);
const char *engine__groups_check(const engine *e);   /* NULL or the breach */

#endif
