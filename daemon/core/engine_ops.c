/* engine_ops.c -- one op's own decision, by op: the table from an op to
 * the file whose rule decides it. No phase, throttle or kind gate and no
 * counting: those are engine.c's, for a request from the queue. The
 * waitlist (engine_wait.c) serves a waiting request through this too, so
 * it sits below both and calls neither.
 */
#include "engine_ops_int.h"
#include "engine_groups_int.h"
#include "engine_hold_int.h"
#include "engine_rooms_int.h"
#include "engine_state.h"
#include "engine_stock_int.h"
#include "engine_swap_int.h"

engine_reason engine__op_decide(engine *e, uint32_t ui, const engine_request *r,
                               int64_t now, engine_result *out)
{
    switch (r->op) {
    case OP_BUY: return engine__stock_buy(e, ui, r, now, out);
    case OP_CONFIRM:
        return is_rooms(e) ? engine__hold_confirm(e, ui, r, now, out) : engine__stock_confirm(e, ui, r, now, out);
    case OP_CANCEL:
        return is_rooms(e) ? engine__rooms_cancel(e, ui, r, now, out) : engine__stock_cancel(e, ui, r, now, out);
    case OP_CHOOSE: return engine__rooms_choose(e, ui, r, now, out);
    case OP_AUTO: return engine__rooms_auto(e, ui, r, now, out);
    case OP_GROUP: case OP_INVITE: case OP_ACCEPT: case OP_DECLINE: case OP_LEAVE: case OP_PREFS:
        return engine__groups_decide(e, ui, r, now, out);
    case OP_SWAP: return engine__swaps_decide(e, ui, r, now, out);
    case OP_SWITCH: return engine__rooms_switch(e, ui, r, now, out);
    case OP_RELEASE: return engine__rooms_release(e, ui, r, now, out);
    default: return REASON_NONE;   /* request_ok() let no other op through */
    }
}
