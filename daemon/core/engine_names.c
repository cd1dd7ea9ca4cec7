/* engine_names.c -- the names the contract gives ops, reasons, statuses,
 * events and phases, both ways, and the meta defaults. Tables only, apart
 * from the decisions, so a new reason is one line here and one in
 * engine.h. */
#include "core/engine.h"

#include <string.h>

static const char *const op_names[] = {
    [OP_BUY] = "buy", [OP_CONFIRM] = "confirm", [OP_CANCEL] = "cancel",
    [OP_CHOOSE] = "choose", [OP_AUTO] = "auto", [OP_GROUP] = "group",
    [OP_SWITCH] = "switch", [OP_RELEASE] = "release", [OP_PAUSE] = "pause",
    [OP_RESUME] = "resume", [OP_CLOSE] = "close",
    [OP_SET_CAPACITY] = "set_capacity", [OP_INVITE] = "invite", [OP_ACCEPT] = "accept",
    [OP_DECLINE] = "decline", [OP_LEAVE] = "leave", [OP_PREFS] = "prefs", [OP_SWAP] = "swap",
};

static const char *const reason_names[] = {
    [R_SOLD_OUT] = "sold_out", [R_ROOM_FULL] = "room_full",
    [R_NO_ROOM] = "no_room", [R_LIMIT] = "limit",
    [R_ALREADY_HOLDING] = "already_holding", [R_MEMBER_BUSY] = "member_busy",
    [R_NOT_HOLDING] = "not_holding", [R_UNKNOWN_ITEM] = "unknown_item",
    [R_UNKNOWN_ORDER] = "unknown_order", [R_EXPIRED] = "expired",
    [R_NOT_OPEN] = "not_open", [R_CLOSED] = "closed", [R_PAUSED] = "paused",
    [R_THROTTLED] = "throttled", [R_WRONG_KIND] = "wrong_kind",
    [R_GROUP_TOO_LARGE] = "group_too_large", [R_NO_INVITATION] = "no_invitation",
    [R_NOT_IN_GROUP] = "not_in_group", [R_CONFLICT] = "conflict",
};

static const char *const status_names[] = {
    [ST_GRANTED] = "granted", [ST_DONE] = "done", [ST_REJECTED] = "rejected",
    [ST_INVALID] = "invalid", [ST_WAITING] = "waiting",
};

static const char *const event_names[] = {
    [EV_GRANT] = "grant", [EV_RELEASE] = "release", [EV_EXPIRE] = "expire",
    [EV_CONFIRM] = "confirm", [EV_CANCEL] = "cancel",
    [EV_CAPACITY] = "capacity", [EV_STATE] = "state",
    [EV_WAIT] = "wait", [EV_WAIT_SERVED] = "wait_served",
};

static const char *const phase_names[] = {
    [PHASE_WAITING] = "waiting", [PHASE_OPEN] = "open",
    [PHASE_PAUSED] = "paused", [PHASE_CLOSED] = "closed",
};

#define NAME_OF(table, i) \
    ((size_t)(i) < sizeof(table) / sizeof(table[0]) ? table[(size_t)(i)] : NULL)

const char *engine_op_name(engine_op op) { return NAME_OF(op_names, op); }
const char *engine_reason_name(engine_reason r) { return NAME_OF(reason_names, r); }
const char *engine_status_name(engine_status s) { return NAME_OF(status_names, s); }
const char *engine_event_name(engine_event_type t) { return NAME_OF(event_names, t); }
const char *engine_phase_name(engine_phase p) { return NAME_OF(phase_names, p); }

engine_op engine_op_parse(const char *name)
{
    if (!name) return OP_NONE;
    for (size_t i = 1; i < sizeof op_names / sizeof op_names[0]; i++)
        if (op_names[i] && strcmp(op_names[i], name) == 0) return (engine_op)i;
    return OP_NONE;
}

void engine_meta_defaults(engine_meta *m)
{
    memset(m, 0, sizeof *m);
    m->early = EARLY_REJECT;
    m->per_user = 1;
    m->max_group = 8;
    m->rate_window_ms = 1000;
    m->penalty_ms = 15000;
}
