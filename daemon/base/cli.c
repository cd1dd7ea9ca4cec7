/* cli.c -- allocd's command line (see cli.h). Hand-written rather than
 * getopt_long: no global state (optind, optarg), so it can run any number
 * of times in one process, and its messages follow the "command line: ..."
 * form of every configuration error.
 */
#include "base/cli.h"
#include "base/config.h"

#include <string.h>

enum { OPT_CONFIG, OPT_REDIS, OPT_PREFIX, OPT_INSTANCE, OPT_CHECK, OPT_VERSION,
       OPT_HELP, NOPTS };

static const struct {
    const char *name;   /* long form, without "--" */
    char short_name;    /* 0: none */
    int takes_value;
} OPTS[NOPTS] = {
    [OPT_CONFIG] = { "config", 'c', 1 },
    [OPT_REDIS] = { "redis", 0, 1 },
    [OPT_PREFIX] = { "prefix", 0, 1 },
    [OPT_INSTANCE] = { "instance", 0, 1 },
    [OPT_CHECK] = { "check-config", 0, 0 },
    [OPT_VERSION] = { "version", 'V', 0 },
    [OPT_HELP] = { "help", 'h', 0 },
};

/* "--name" or "--name=value": the option index, *value set for the second. */
static int match_long(const char *arg, const char **value)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    *value = eq ? eq + 1 : NULL;
    for (int i = 0; i < NOPTS; i++)
        if (strlen(OPTS[i].name) == n && strncmp(OPTS[i].name, arg, n) == 0) return i;
    return -1;
}

/* "-c" or "-cFILE" (the getopt convention): the option index. */
static int match_short(const char *arg, const char **value)
{
    *value = arg[1] ? arg + 1 : NULL;
    for (int i = 0; i < NOPTS; i++)
        if (OPTS[i].short_name && OPTS[i].short_name == arg[0]) return i;
    return -1;
}

static void store_option(cli_args *out, int id, const char *value, unsigned *actions)
{
    switch (id) {
    case OPT_CONFIG:   out->config_path = value; break;
    case OPT_REDIS:    out->redis_url = value; break;
    case OPT_PREFIX:   out->prefix = value; break;
    case OPT_INSTANCE: out->instance = value; break;
    default:           *actions |= 1u << id; break;
    }
}

/* Several actions at once: help beats version beats check-config,
 * whatever their order, since each of them exits. */
static cli_action pick_action(unsigned actions)
{
    if (actions & (1u << OPT_HELP)) return CLI_HELP;
    if (actions & (1u << OPT_VERSION)) return CLI_VERSION;
    if (actions & (1u << OPT_CHECK)) return CLI_CHECK_CONFIG;
    return CLI_RUN;
}

/* Resolves the value of option id. A separate next argument that looks like
 * an option ("-c --check-config") is a forgotten value, not a file name;
 * such a value can still be given as --config=-file. Returns how many extra
 * arguments were consumed (0 or 1), or -1 with err. */
static int take_value(int id, const char *shown, const char **value, int argc,
                      char **argv, int i, char *err, size_t errlen)
{
    if (!OPTS[id].takes_value) {
        if (!*value) return 0;
        snprintf(err, errlen, "command line: option '%s' takes no value", shown);
        return -1;
    }
    if (*value) return 0;
    if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] != '\0')) {
        snprintf(err, errlen, "command line: option '%s' needs a value", shown);
        return -1;
    }
    *value = argv[i + 1];
    return 1;
}

int cli_parse(int argc, char **argv, cli_args *out, char *err, size_t errlen)
{
    unsigned actions = 0;
    memset(out, 0, sizeof *out);
    out->action = CLI_RUN;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        int id = -1;
        if (strcmp(arg, "--") == 0) {
            if (i + 1 < argc) {
                snprintf(err, errlen, "command line: unexpected argument '%s'", argv[i + 1]);
                return -1;
            }
            break;
        }
        if (arg[0] == '-' && arg[1] == '-') id = match_long(arg + 2, &value);
        else if (arg[0] == '-' && arg[1]) id = match_short(arg + 1, &value);
        else {
            snprintf(err, errlen, "command line: unexpected argument '%s'", arg);
            return -1;
        }
        if (id < 0) {
            snprintf(err, errlen, "command line: unknown option '%s' (try --help)", arg);
            return -1;
        }
        char shown[32];
        if (arg[1] == '-') snprintf(shown, sizeof shown, "--%s", OPTS[id].name);
        else snprintf(shown, sizeof shown, "-%c", OPTS[id].short_name);
        int used = take_value(id, shown, &value, argc, argv, i, err, errlen);
        if (used < 0) return -1;
        i += used;
        store_option(out, id, value, &actions);
    }
    out->action = pick_action(actions);
    return 0;
}

void cli_usage(FILE *out, const char *argv0)
{
    const char *name = argv0 && *argv0 ? argv0 : "allocd";
    fprintf(out,
        "Usage: %s [-c FILE] [--redis URL] [--prefix P] [--instance NAME] "
        "[--check-config] [--version] [--help]\n"
        "\n"
        "  -c, --config FILE    read settings from FILE (it must exist)\n"
        "      --redis URL      Redis server: redis://[user:password@]host:port or unix:///path\n"
        "      --prefix P       key prefix, 1 to 64 characters from [A-Za-z0-9_.:-]\n"
        "      --instance NAME  this daemon's name in the registry (default: host name)\n"
        "      --check-config   check the configuration; exit 0, or 1 with file:line: message\n"
        "  -V, --version        print the version and exit\n"
        "  -h, --help           print this help and exit\n"
        "\n"
        "Options also take the --option=value form. Command-line values override\n"
        "the config file. Without -c the default config file is read if present:\n"
        "  %s\n"
        "(set ALLOCD_CONFIG to use another default path).\n",
        name, config_default_path());
}
