/* sim_loop.c -- the simulator's event queue, and the machine it replaces:
 * the libuv timer and close calls the worker makes, base/clock.h and
 * base/random.h. All of them read the one simulated clock and the one
 * seeded random stream, so a seed replays exactly.
 *
 * A timer remembers its instance (the one whose code created it) in the
 * handle's fd slot, which an uninitialised libuv never looks at here: an
 * instance that is paused then also stops firing timers, as a stopped
 * process would.
 */
#include <stdarg.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/clock.h"
#include "base/random.h"
#include "sim/sim.h"

sim_world *sim_w;

typedef struct sim_event {
    uint64_t t, seq;
    int inst;
    sim_fn fn;
    void *a, *b;
    uint64_t x;
} sim_event;

static sim_event *heap;
/* a paused instance's events, held in order (sim_step) */
static sim_event *held[SIM_MAX_INST];
static size_t held_n[SIM_MAX_INST], held_cap[SIM_MAX_INST];
static int wake_pending[SIM_MAX_INST];
static sim_fn timer_fire_fn(void);
static size_t heap_n, heap_cap;
static uint64_t heap_seq;

static int ev_less(const sim_event *a, const sim_event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(sim_event e)
{
    if (heap_n == heap_cap) {
        heap_cap = heap_cap ? heap_cap * 2 : 256;
        heap = realloc(heap, heap_cap * sizeof *heap);
        if (!heap) abort();
    }
    size_t i = heap_n++;
    heap[i] = e;
    while (i > 0 && ev_less(&heap[i], &heap[(i - 1) / 2])) {
        sim_event t = heap[i];
        heap[i] = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static sim_event heap_pop(void)
{
    sim_event top = heap[0];
    heap[0] = heap[--heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_n && ev_less(&heap[l], &heap[m])) m = l;
        if (r < heap_n && ev_less(&heap[r], &heap[m])) m = r;
        if (m == i) break;
        sim_event t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
    return top;
}

void sim_at(uint64_t t, int inst, sim_fn fn, void *a, void *b, uint64_t x)
{
    if (t < sim_w->now) t = sim_w->now;
    heap_push((sim_event){ t, heap_seq++, inst, fn, a, b, x });
}

uint64_t sim_next_time(void) { return heap_n ? heap[0].t : UINT64_MAX; }

void sim_queue_clear(void)
{
    /* events left own their tokens (timers): run none, free them */
    for (size_t i = 0; i < heap_n; i++)
        if (heap[i].fn == timer_fire_fn()) free(heap[i].a);
    for (int k = 0; k < SIM_MAX_INST; k++) {
        for (size_t i = 0; i < held_n[k]; i++)
            if (held[k][i].fn == timer_fire_fn()) free(held[k][i].a);
        free(held[k]);
        held[k] = NULL;
        held_n[k] = held_cap[k] = 0;
        wake_pending[k] = 0;
    }
    free(heap);
    heap = NULL;
    heap_n = heap_cap = 0;
    heap_seq = 0;
}

/* A paused instance's events are held, in the order they came due, and run
 * in that order when it wakes: a stopped process sees its timers and
 * replies late but never reordered, even when a pause is cut short or a
 * new one overlaps it. While any are held, the instance's later events
 * queue behind them. */

static void hold(sim_event e)
{
    int i = e.inst;
    if (held_n[i] == held_cap[i]) {
        held_cap[i] = held_cap[i] ? held_cap[i] * 2 : 64;
        held[i] = realloc(held[i], held_cap[i] * sizeof *held[i]);
        if (!held[i]) abort();
    }
    held[i][held_n[i]++] = e;
}

static void run_event(const sim_event *e)
{
    sim_w->cur = e->inst;
    sim_w->events++;
    e->fn(e->a, e->b, e->x);
    sim_w->cur = -1;
}

static void ev_wake(void *a, void *b, uint64_t inst)
{
    sim_inst *in = &sim_w->inst[inst];
    if (in->paused_until > sim_w->now) {   /* paused again meanwhile */
        sim_at(in->paused_until, -1, ev_wake, NULL, NULL, inst);
        return;
    }
    wake_pending[inst] = 0;
    /* run them in order; one may pause the instance again (it cannot: only
     * world events do), or add events of its own, which queue behind */
    for (size_t k = 0; k < held_n[inst]; k++) {
        sim_event e = held[inst][k];
        run_event(&e);
    }
    held_n[inst] = 0;
}

static void schedule_wake(int inst, uint64_t t)
{
    if (wake_pending[inst]) return;
    wake_pending[inst] = 1;
    sim_at(t, -1, ev_wake, NULL, NULL, (uint64_t)inst);
}

void sim_resume(int inst)
{
    sim_w->inst[inst].paused_until = 0;
    if (held_n[inst]) { wake_pending[inst] = 0; schedule_wake(inst, sim_w->now); }
}

int sim_step(void)
{
    if (!heap_n) return 0;
    sim_event e = heap_pop();
    sim_w->now = e.t;
    if (e.inst >= 0 && (sim_w->inst[e.inst].paused_until > e.t || held_n[e.inst])) {
        hold(e);
        uint64_t until = sim_w->inst[e.inst].paused_until;
        schedule_wake(e.inst, until > e.t ? until : e.t);
        return 1;
    }
    run_event(&e);
    return 1;
}

/* splitmix64: small, good enough, and the same everywhere */
uint64_t sim_rand(void)
{
    uint64_t z = (sim_w->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t sim_below(uint64_t n) { return n ? sim_rand() % n : 0; }
int sim_chance(double p) { return (double)(sim_rand() >> 11) / 9007199254740992.0 < p; }
int64_t sim_server_ms(void) { return sim_w->epoch_ms + (int64_t)(sim_w->now / 1000000); }

void sim_fail(const char *fmt, ...)
{
    if (sim_w->failed) return;
    sim_w->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sim_w->failure, sizeof sim_w->failure, fmt, ap);
    va_end(ap);
}

/* --------------------------------------------------- base/clock, random -- */

static int64_t inst_offset_ms(void)
{
    return sim_w->cur >= 0 ? sim_w->inst[sim_w->cur].wall_offset_ms : 0;
}

int64_t clock_wall_ms(void) { return sim_server_ms() + inst_offset_ms(); }
int64_t clock_wall_us(void) { return clock_wall_ms() * 1000 + (int64_t)(sim_w->now / 1000 % 1000); }
int64_t clock_mono_us(void) { return (int64_t)(sim_w->now / 1000); }
void clock_sleep_us(int64_t us) { (void)us; }
void clock_sleep_ms(int ms) { (void)ms; }
uint64_t random_u64(void) { return sim_rand(); }

/* Each simulated process has a pid of its own, new at every restart, so a
 * restarted instance recognises its previous run's lease as a dead
 * process's and takes it over (batch_lease_holder_dead). They lie above
 * Linux's largest pid (2^22), so the kill(pid, 0) that checks them finds
 * no such process; the one an instance asks about for itself is its own. */
pid_t getpid(void)
{
    if (!sim_w || sim_w->cur < 0) return 1;
    return (pid_t)(5000000 + sim_w->cur * 1000 + sim_w->inst[sim_w->cur].boots);
}

/* ------------------------------------------------------------ libuv -- */

/* The simulated monotonic clock (a paused process's clock runs on). */
uint64_t uv_hrtime(void) { return sim_w->now + 1000000000ULL; }

/* A started timer's event owns a small token that points back at the
 * handle; stopping or restarting the timer detaches the token, so an event
 * still queued for a handle that was stopped (and maybe freed since) finds
 * a detached token and never touches the handle. The handle keeps its
 * current token in heap_node[0] (non-NULL: active). */
typedef struct timer_token { uv_timer_t *h; } timer_token;

static void timer_detach(uv_timer_t *h)
{
    timer_token *t = h->heap_node[0];
    if (t) t->h = NULL;
    h->heap_node[0] = NULL;
}

int uv_timer_init(uv_loop_t *loop, uv_timer_t *h)
{
    memset(h, 0, sizeof *h);
    h->loop = loop;
    h->type = UV_TIMER;
    h->u.fd = sim_w->cur;
    return 0;
}

static void timer_fire(void *a, void *b, uint64_t x)
{
    timer_token *t = a;
    uv_timer_t *h = t->h;
    if (!h) { free(t); return; }
    if (h->repeat) {
        h->timeout = sim_w->now + h->repeat * 1000000ULL;
        sim_at(h->timeout, h->u.fd, timer_fire, t, NULL, 0);
    } else {
        h->heap_node[0] = NULL;
        free(t);
    }
    h->timer_cb(h);
}

int uv_timer_start(uv_timer_t *h, uv_timer_cb cb, uint64_t timeout, uint64_t repeat)
{
    timer_detach(h);
    timer_token *t = malloc(sizeof *t);
    if (!t) abort();
    t->h = h;
    h->heap_node[0] = t;
    h->timer_cb = cb;
    h->repeat = repeat;
    h->timeout = sim_w->now + timeout * 1000000ULL;
    sim_at(h->timeout, h->u.fd, timer_fire, t, NULL, 0);
    return 0;
}

int uv_timer_stop(uv_timer_t *h)
{
    timer_detach(h);
    return 0;
}

/* A timer is active while its token is attached (redis_router.c asks,
 * closing, which retry timers still wait). */
int uv_is_active(const uv_handle_t *h)
{
    return h->type == UV_TIMER && ((const uv_timer_t *)h)->heap_node[0] != NULL;
}

static void close_fire(void *a, void *b, uint64_t x)
{
    uv_handle_t *h = a;
    if (h->close_cb) h->close_cb(h);
}

void uv_close(uv_handle_t *h, uv_close_cb cb)
{
    if (h->type == UV_TIMER) uv_timer_stop((uv_timer_t *)h);
    h->close_cb = cb;
    sim_at(sim_w->now, h->u.fd, close_fire, h, NULL, 0);
}

static sim_fn timer_fire_fn(void) { return timer_fire; }

/* The sim binary links with -Wl,--wrap=clock_gettime (mk/sim.mk): what
 * reads the time without clock.h -- the log's timestamps and its repeat
 * window -- reads the simulated clock, so -v shows simulated time and a
 * replay's log is the same every run. */
int __wrap_clock_gettime(clockid_t id, struct timespec *ts);
int __real_clock_gettime(clockid_t id, struct timespec *ts);
int __wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
    if (!sim_w) return __real_clock_gettime(id, ts);
    uint64_t ns = id == CLOCK_REALTIME ? (uint64_t)sim_server_ms() * 1000000ULL + sim_w->now % 1000000ULL
                                       : sim_w->now + 1000000000ULL;
    ts->tv_sec = (time_t)(ns / 1000000000ULL);
    ts->tv_nsec = (long)(ns % 1000000000ULL);
    return 0;
}
