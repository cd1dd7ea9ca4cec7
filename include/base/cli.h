/* cli.h -- allocd's command line: what it asks for, parsed without global
 * state (docs/PROTOCOL.md section 8 names the options). config.h applies
 * the values over the config file's.
 */
#ifndef ALLOCD_CLI_H
#define ALLOCD_CLI_H

#include <stddef.h>
#include <stdio.h>

/* What the command line asked for. */
typedef enum {
    CLI_RUN = 0, CLI_CHECK_CONFIG, CLI_VERSION, CLI_HELP
} cli_action;

typedef struct cli_args {
    cli_action action;
    const char *config_path;  /* -c FILE; NULL = default path */
    const char *redis_url;    /* --redis */
    const char *prefix;       /* --prefix */
    const char *instance;     /* --instance */
    const char *redis_user;   /* allocctl --redis-user */
    const char *redis_password_file; /* allocctl --redis-password-file */
    int tool;                 /* loaded for allocctl, not the daemon: the daemon's own
                                 credentials (metrics_token_file) are not read */
} cli_args;

/* Parses argv. Returns 0, or -1 with "command line: ..." in err. */
int cli_parse(int argc, char **argv, cli_args *out, char *err, size_t errlen);
/* The --help text; it names the default config path (config.h). */
void cli_usage(FILE *out, const char *argv0);

#endif
