/* answer_watch.c -- see answer_watch.h. */
#include "core/answer_watch.h"

#include <string.h>

#include "core/assert.h"

void answer_watch_init(answer_watch *aw, int64_t now_ms)
{
    memset(aw, 0, sizeof *aw);
    aw->last_good_ms = now_ms;
    aw->last_apply_ms = now_ms;  /* "no apply since" counts from the start */
    answer_watch_reset(aw);
}

void answer_watch_reset(answer_watch *aw)
{
    aw->n = 0;
    aw->answered = 0;
    aw->last_probe_ms = -1;
    aw->ctl_since_ms = -1;
}

/* Drops the marks every request of which has been answered. */
static void drop_answered(answer_watch *aw)
{
    size_t k = 0;
    while (k < aw->n && aw->marks[k].end <= aw->answered) k++;
    if (k == 0) return;
    memmove(aw->marks, aw->marks + k, (aw->n - k) * sizeof aw->marks[0]);
    aw->n -= k;
}

static void add_mark(answer_watch *aw, int64_t since_ms, int64_t end)
{
    if (aw->n > 0) {
        answer_mark *last = &aw->marks[aw->n - 1];
        if (end <= last->end) return;          /* nothing new arrived */
        if (aw->n == ANSWER_WATCH_MARKS) {     /* full: the newest absorbs it */
            last->end = end;                   /* (ages of new ones err high) */
            return;
        }
    }
    aw->marks[aw->n++] = (answer_mark){ since_ms, end };
}

void answer_watch_probe(answer_watch *aw, int64_t sent_ms, int64_t dequeued,
                        int64_t queue_len, int64_t ctl_len)
{
    ALLOC_ASSERT(queue_len >= 0 && ctl_len >= 0 && dequeued >= 0);
    /* stats.dequeued only grows, except when the batch is deleted and made
     * again: then everything seen before is gone */
    if (dequeued < aw->answered) aw->n = 0;
    int64_t since = aw->last_probe_ms >= 0 && aw->last_probe_ms <= sent_ms ? aw->last_probe_ms : sent_ms;
    aw->answered = dequeued;
    drop_answered(aw);
    if (queue_len > 0) add_mark(aw, since, dequeued + queue_len);
    if (ctl_len == 0) aw->ctl_since_ms = -1;
    else if (aw->ctl_since_ms < 0) aw->ctl_since_ms = since;
    aw->last_probe_ms = sent_ms;
    ALLOC_ASSERT(aw->n <= ANSWER_WATCH_MARKS);
}

int64_t answer_watch_oldest_ms(const answer_watch *aw, int64_t now_ms)
{
    int64_t since = -1;
    if (aw->n > 0) since = aw->marks[0].since_ms;
    if (aw->ctl_since_ms >= 0 && (since < 0 || aw->ctl_since_ms < since)) since = aw->ctl_since_ms;
    return since >= 0 && now_ms > since ? now_ms - since : 0;
}

void answer_watch_good(answer_watch *aw, int64_t now_ms)
{
    if (now_ms > aw->last_good_ms) aw->last_good_ms = now_ms;
}

void answer_watch_applied(answer_watch *aw, int64_t now_ms)
{
    answer_watch_good(aw, now_ms);
    if (now_ms > aw->last_apply_ms) aw->last_apply_ms = now_ms;
}

int64_t answer_watch_unable_ms(const answer_watch *aw, int64_t now_ms)
{
    return now_ms > aw->last_good_ms ? now_ms - aw->last_good_ms : 0;
}

int64_t answer_watch_idle_ms(const answer_watch *aw, int64_t now_ms)
{
    return now_ms > aw->last_apply_ms ? now_ms - aw->last_apply_ms : 0;
}
