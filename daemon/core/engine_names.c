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
    [OP_ASSIGN] = "assign", [OP_UNASSIGN] = "unassign",
};

static const char *const reason_names[] = {
    [REASON_SOLD_OUT] = "sold_out", [REASON_ROOM_FULL] = "room_full",
    [REASON_NO_ROOM] = "no_room", [REASON_LIMIT] = "limit",
    [REASON_ALREADY_HOLDING] = "already_holding", [REASON_MEMBER_BUSY] = "member_busy",
    [REASON_NOT_HOLDING] = "not_holding", [REASON_UNKNOWN_ITEM] = "unknown_item",
    [REASON_UNKNOWN_ORDER] = "unknown_order", [REASON_EXPIRED] = "expired",
    [REASON_NOT_OPEN] = "not_open", [REASON_CLOSED] = "closed", [REASON_PAUSED] = "paused",
    [REASON_THROTTLED] = "throttled", [REASON_WRONG_KIND] = "wrong_kind",
    [REASON_GROUP_TOO_LARGE] = "group_too_large", [REASON_NO_INVITATION] = "no_invitation",
    [REASON_NOT_IN_GROUP] = "not_in_group", [REASON_CONFLICT] = "conflict",
    [REASON_NOT_ELIGIBLE] = "not_eligible",
};

static const char *const status_names[] = {
    [STATUS_GRANTED] = "granted", [STATUS_DONE] = "done", [STATUS_REJECTED] = "rejected",
    [STATUS_INVALID] = "invalid", [STATUS_WAITING] = "waiting",
};

static const char *const event_names[] = {
    [EVENT_GRANT] = "grant", [EVENT_RELEASE] = "release", [EVENT_EXPIRE] = "expire",
    [EVENT_CONFIRM] = "confirm", [EVENT_CANCEL] = "cancel",
    [EVENT_CAPACITY] = "capacity", [EVENT_STATE] = "state",
    [EVENT_WAIT] = "wait", [EVENT_WAIT_SERVED] = "wait_served",
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
