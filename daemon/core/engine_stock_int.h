/* engine_stock_int.h -- the stock decisions (engine_stock.c): buy, confirm,
 * cancel and the expiry of one reservation. Each returns the reason of a
 * refusal, or REASON_NONE when it filled *out itself (granted/done, or
 * STATUS_NONE when memory ran out). Stands on engine_state.h only.
 */
#ifndef ALLOCD_ENGINE_STOCK_INT_H
#define ALLOCD_ENGINE_STOCK_INT_H

#include "core/engine.h"

engine_reason engine__stock_buy(engine *e, uint32_t ui, const engine_request *r,
                                int64_t now, engine_result *out);
engine_reason engine__stock_confirm(engine *e, uint32_t ui, const engine_request *r,
                                    int64_t now, engine_result *out);
engine_reason engine__stock_cancel(engine *e, uint32_t ui, const engine_request *r,
                                   int64_t now, engine_result *out);
/* Ends live order oi of user ui as EXPIRED (caller reserved 1 event, user,
 * item and ended order). */
void engine__stock_expire(engine *e, uint32_t ui, uint32_t oi, int64_t now);

#endif
