/* netrelay.c -- a TCP relay that delays, "loses" and stalls what it
 * forwards: the partition tests' stand-in for netem, which this kernel
 * lacks. Test tooling only; nothing of the daemon links it.
 *
 *   netrelay LISTEN_IP:PORT TARGET_IP:PORT CONTROL_FILE
 *
 * Every connection accepted on LISTEN is paired with a new connection to
 * TARGET, and the bytes read on one side are written to the other once
 * they are due. The faults come from CONTROL_FILE, read at start and again
 * on SIGHUP: one line "DELAY_MS JITTER_MS LOSS_PCT STALL" (all 0: a plain
 * relay). Each piece read is due DELAY +/- JITTER ms later; with
 * probability LOSS_PCT percent it counts as a lost segment, and TCP would
 * resend it after a retransmission timeout, so it is due that much later
 * again (200 ms, doubling with each loss in a row up to 3.2 s, as Linux's
 * minimum RTO does). Order within a direction is kept, as TCP keeps it.
 * STALL = 1 forwards nothing until it is 0 again (a path that hangs
 * without an error). The relay runs in the Redis namespace, so the test
 * reaches only addresses it made itself.
 *
 * One thread, poll(2), a queue of pieces per direction; it exits on
 * SIGTERM (the test stops it) or when its parent dies.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RELAY_MAX_PAIRS 32
#define RELAY_PIECE 16384
#define RELAY_QUEUE_MAX (8 << 20)   /* stop reading a side past this backlog */

typedef struct piece {
    struct piece *next;
    int64_t due_ms;
    size_t len, off;
    char data[];
} piece;

typedef struct flow {           /* one direction: read from `from`, write to `to` */
    piece *head, *tail;
    size_t queued;
    int64_t last_due;
    int losses;                 /* losses in a row, for the RTO's doubling */
} flow;

typedef struct pair {
    int fd[2];                  /* 0: the accepted client, 1: the target */
    flow dir[2];                /* dir[i]: read from fd[i], written to fd[1 - i] */
} pair;

typedef struct faults { int delay_ms, jitter_ms, loss_pct, stall; } faults;

static volatile sig_atomic_t relay_reload, relay_stop;
static faults relay_faults;
static const char *relay_control;

static void relay__on_signal(int sig)
{
    if (sig == SIGHUP) relay_reload = 1;
    else relay_stop = 1;
}

static int64_t relay__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void relay__load(void)
{
    faults f = { 0, 0, 0, 0 };
    FILE *in = fopen(relay_control, "r");
    if (in) {
        if (fscanf(in, "%d %d %d %d", &f.delay_ms, &f.jitter_ms, &f.loss_pct, &f.stall) != 4)
            fprintf(stderr, "netrelay: %s: want 'DELAY JITTER LOSS STALL'\n", relay_control);
        fclose(in);
    }
    relay_faults = f;
    fprintf(stderr, "netrelay: delay %d +/- %d ms, loss %d%%, stall %d\n", f.delay_ms,
            f.jitter_ms, f.loss_pct, f.stall);
}

static int relay__addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host) return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

/* When a piece read now is due: delay, jitter, a lost segment's RTO, and
 * never before the piece ahead of it. */
static int64_t relay__due(flow *fl, int64_t now)
{
    const faults *f = &relay_faults;
    int64_t due = now + f->delay_ms;
    if (f->jitter_ms > 0) due += rand() % (2 * f->jitter_ms + 1) - f->jitter_ms;
    if (f->loss_pct > 0 && rand() % 100 < f->loss_pct) {
        int rto = 200 << (fl->losses < 4 ? fl->losses : 4);
        fl->losses++;
        due += rto;
    } else {
        fl->losses = 0;
    }
    if (due < fl->last_due) due = fl->last_due;
    fl->last_due = due;
    return due;
}

static void relay__flow_free(flow *fl)
{
    while (fl->head) {
        piece *p = fl->head;
        fl->head = p->next;
        free(p);
    }
    memset(fl, 0, sizeof *fl);
}

static void relay__close(pair *p)
{
    for (int i = 0; i < 2; i++) {
        if (p->fd[i] >= 0) close(p->fd[i]);
        p->fd[i] = -1;
        relay__flow_free(&p->dir[i]);
    }
}

/* Reads what side i has into its flow; -1 when the side closed. */
static int relay__read(pair *p, int i, int64_t now)
{
    piece *pc = malloc(sizeof *pc + RELAY_PIECE);
    if (!pc) return -1;
    ssize_t n = read(p->fd[i], pc->data, RELAY_PIECE);
    if (n <= 0) {
        free(pc);
        return n < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }
    flow *fl = &p->dir[i];
    pc->next = NULL;
    pc->len = (size_t)n;
    pc->off = 0;
    pc->due_ms = relay__due(fl, now);
    if (fl->tail) fl->tail->next = pc;
    else fl->head = pc;
    fl->tail = pc;
    fl->queued += (size_t)n;
    return 0;
}

/* Writes the due pieces of flow i to the other side; -1 on an error. */
static int relay__write(pair *p, int i, int64_t now)
{
    flow *fl = &p->dir[i];
    while (fl->head && fl->head->due_ms <= now && !relay_faults.stall) {
        piece *pc = fl->head;
        ssize_t n = write(p->fd[1 - i], pc->data + pc->off, pc->len - pc->off);
        if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
        pc->off += (size_t)n;
        fl->queued -= (size_t)n;
        if (pc->off < pc->len) return 0;
        fl->head = pc->next;
        if (!fl->head) fl->tail = NULL;
        free(pc);
    }
    return 0;
}

static void relay__accept(int lfd, const struct sockaddr_in *target, pair *pairs)
{
    int c = accept(lfd, NULL, NULL);
    if (c < 0) return;
    int t = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (t < 0 || connect(t, (const struct sockaddr *)target, sizeof *target) < 0) {
        close(c);
        if (t >= 0) close(t);
        return;
    }
    for (int k = 0; k < RELAY_MAX_PAIRS; k++) {
        if (pairs[k].fd[0] >= 0) continue;
        memset(&pairs[k], 0, sizeof pairs[k]);
        pairs[k].fd[0] = c;
        pairs[k].fd[1] = t;
        for (int i = 0; i < 2; i++) {
            fcntl(pairs[k].fd[i], F_SETFL, O_NONBLOCK);
            setsockopt(pairs[k].fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        return;
    }
    close(c);      /* full: the client sees its connection closed */
    close(t);
}

/* One poll round over the listener and every pair. */
static void relay__round(int lfd, const struct sockaddr_in *target, pair *pairs)
{
    struct pollfd pfd[1 + 2 * RELAY_MAX_PAIRS];
    int64_t now = relay__now_ms(), next = now + 1000;
    pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
    for (int k = 0; k < RELAY_MAX_PAIRS; k++) {
        for (int i = 0; i < 2; i++) {
            pair *p = &pairs[k];
            flow *in = &p->dir[i], *out = &p->dir[1 - i];
            short ev = 0;
            if (p->fd[i] >= 0 && in->queued < RELAY_QUEUE_MAX) ev |= POLLIN;
            if (p->fd[i] >= 0 && out->head && !relay_faults.stall) {
                if (out->head->due_ms <= now) ev |= POLLOUT;
                else if (out->head->due_ms < next) next = out->head->due_ms;
            }
            pfd[1 + 2 * k + i] = (struct pollfd){ .fd = ev ? p->fd[i] : -1, .events = ev };
        }
    }
    if (poll(pfd, 1 + 2 * RELAY_MAX_PAIRS, (int)(next - now)) < 0) return;
    now = relay__now_ms();
    if (pfd[0].revents & POLLIN) relay__accept(lfd, target, pairs);
    for (int k = 0; k < RELAY_MAX_PAIRS; k++) {
        pair *p = &pairs[k];
        for (int i = 0; i < 2 && p->fd[0] >= 0; i++) {
            short rev = pfd[1 + 2 * k + i].revents;
            int bad = (rev & POLLIN) && relay__read(p, i, now) < 0;
            bad = bad || ((rev & (POLLERR | POLLHUP)) && !(rev & POLLIN));
            bad = bad || relay__write(p, 1 - i, now) < 0;
            if (bad) relay__close(p);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: netrelay LISTEN_IP:PORT TARGET_IP:PORT CONTROL_FILE\n");
        return 2;
    }
    struct sockaddr_in listen_at, target;
    if (relay__addr(argv[1], &listen_at) < 0 || relay__addr(argv[2], &target) < 0) {
        fprintf(stderr, "netrelay: addresses are IPv4 IP:PORT\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    relay_control = argv[3];
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = { .sa_handler = relay__on_signal };
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    srand((unsigned)getpid());
    relay__load();
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&listen_at, sizeof listen_at) < 0 || listen(lfd, 64) < 0) {
        fprintf(stderr, "netrelay: cannot listen on %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    static pair pairs[RELAY_MAX_PAIRS];
    for (int k = 0; k < RELAY_MAX_PAIRS; k++) pairs[k].fd[0] = pairs[k].fd[1] = -1;
    fprintf(stderr, "netrelay: %s -> %s\n", argv[1], argv[2]);
    while (!relay_stop) {
        if (relay_reload) { relay_reload = 0; relay__load(); }
        relay__round(lfd, &target, pairs);
    }
    for (int k = 0; k < RELAY_MAX_PAIRS; k++) relay__close(&pairs[k]);
    close(lfd);
    return 0;
}
