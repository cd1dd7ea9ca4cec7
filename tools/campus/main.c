/* alloccampus -- a university housing round on allocd, end to end (issue
 * 35): `gen` writes a realistic campus from a seed (campus.h), `round`
 * plays it on a real allocd and checks it (round.h). `make run-housing`
 * runs both at full size; tests/integration/test_housing_round.c runs a
 * campus ten times smaller in `make test`.
 *
 * A tool of its own rather than an allocctl command: allocctl is the
 * operator's tool for any batch, and this is a demonstration and a test
 * that plays the office and three thousand students at once. The round
 * still runs allocctl for everything an office would (batch create,
 * profiles load, verify, lottery verify, report), so what it shows is
 * what an operator types. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "campus.h"
#include "round.h"

static const char USAGE[] =
"Usage: alloccampus gen --out DIR [--seed N] [--students N]\n"
"       alloccampus round --dir DIR [--redis URL | --allocd PATH] [--allocctl PATH]\n"
"                         [--batch B] [--prefix P] [--open-in MS] [--quiet]\n"
"\n"
"gen writes a campus of N students (default 3000: 1,200 rooms in six buildings;\n"
"rooms scale with N) into DIR: rooms.json, profiles.csv, the request streams\n"
"(staff, early, wait, form, place, later .jsonl) and campus.txt. The same seed\n"
"and N give the same files.\n"
"\n"
"round runs the round of DIR on allocd: against --redis URL (an allocd must serve\n"
"it), or on a private redis-server and --allocd PATH that it starts and stops\n"
"(the default: allocd beside this program). It prints what happens, runs allocctl\n"
"verify, lottery verify and report, checks every group and every student, and\n"
"exits 0 when every check holds, 1 when one does not, 3 when Redis, allocd or\n"
"allocctl could not be used, 4 when DIR's files are missing or bad.\n"
"  --batch B      batch id (default housing); --prefix P key prefix (default alloc)\n"
"  --open-in MS   the opening, MS after the batch is created (default 5000): every\n"
"                 early request must be read before it\n"
"  --quiet        only the figures and checks\n";

/* PATH beside this program (build/alloccampus -> build/allocctl). */
static char *beside(const char *argv0, const char *name)
{
    char *copy = strdup(argv0), *path = NULL;
    if (copy && asprintf(&path, "%s/%s", dirname(copy), name) < 0) path = NULL;
    free(copy);
    return path;
}

static int cmd_gen(int argc, char **argv)
{
    const char *out = NULL;
    unsigned long long seed = 1;
    long students = CAMPUS_FULL;
    static const struct option opts[] = { { "out", 1, 0, 'o' }, { "seed", 1, 0, 's' }, { "students", 1, 0, 'n' },
                                          { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        if (ch == 'o') out = optarg;
        else if (ch == 's') seed = strtoull(optarg, &end, 10);
        else if (ch == 'n') students = strtol(optarg, &end, 10);
        else return fputs(USAGE, ch == 'h' ? stdout : stderr), ch == 'h' ? 0 : 2;
        if (end && *end) return fprintf(stderr, "alloccampus gen: not a number: %s\n", optarg), 2;
    }
    if (!out || optind != argc || students < 30 || students > CAMPUS_MAX_STUDENTS) {
        fprintf(stderr, "alloccampus gen: --out DIR is required; --students 30..%d\n%s", CAMPUS_MAX_STUDENTS, USAGE);
        return 2;
    }
    if (mkdir(out, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "alloccampus gen: %s: %s\n", out, strerror(errno));
        return 4;
    }
    campus c;
    if (campus_generate(&c, seed, (int)students) < 0) return fputs("alloccampus gen: out of memory\n", stderr), 3;
    int rc = campus_write(&c, out) < 0 ? 4 : 0;
    if (rc == 0) campus_describe(&c, seed, out, stdout);
    campus_free(&c);
    return rc;
}

static int cmd_round(int argc, char **argv, const char *argv0)
{
    round_opts o = { .prefix = "alloc", .batch = "housing", .open_in_ms = 5000 };
    char *allocd = beside(argv0, "allocd"), *allocctl = beside(argv0, "allocctl");
    o.allocd = allocd;
    o.allocctl = allocctl;
    static const struct option opts[] = { { "dir", 1, 0, 'd' }, { "redis", 1, 0, 'r' }, { "allocd", 1, 0, 'a' },
                                          { "allocctl", 1, 0, 'c' }, { "batch", 1, 0, 'b' }, { "prefix", 1, 0, 'p' },
                                          { "open-in", 1, 0, 'i' }, { "quiet", 0, 0, 'q' }, { "help", 0, 0, 'h' },
                                          { 0, 0, 0, 0 } };
    int ch, rc = -1;
    while (rc < 0 && (ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': o.dir = optarg; break;
        case 'r': o.redis_url = optarg; break;
        case 'a': o.allocd = optarg; break;
        case 'c': o.allocctl = optarg; break;
        case 'b': o.batch = optarg; break;
        case 'p': o.prefix = optarg; break;
        case 'i': o.open_in_ms = atoi(optarg); break;
        case 'q': o.quiet = 1; break;
        default: fputs(USAGE, ch == 'h' ? stdout : stderr); rc = ch == 'h' ? 0 : 2;
        }
    }
    if (rc < 0 && (!o.dir || optind != argc || o.open_in_ms < 500)) {
        fprintf(stderr, "alloccampus round: --dir DIR is required; --open-in at least 500\n%s", USAGE);
        rc = 2;
    }
    if (rc < 0) rc = round_run(&o);
    free(allocd);
    free(allocctl);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(USAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "gen")) return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(argv[1], "round")) return cmd_round(argc - 1, argv + 1, argv[0]);
    fprintf(stderr, "alloccampus: unknown command '%s'\n%s", argv[1], USAGE);
    return 2;
}
