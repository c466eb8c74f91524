/* cli.h: what the command-line front end's files share. Only the front end prints to the
 * terminal and decides exit codes; the library returns statuses and messages. */
#ifndef FLARETUNE_CLI_H
#define FLARETUNE_CLI_H

#include <stdio.h>

#include "flaretune/status.h"

/* Exit codes (documented in README.md). */
enum {
    FT_EXIT_OK = 0,
    FT_EXIT_FAIL = 1,   /* the work failed: I/O, a malformed or inconsistent input, ...   */
    FT_EXIT_USAGE = 2,  /* the request is invalid: unknown command, option, op, value, ... */
    FT_EXIT_NODEV = 3,  /* the backend's device is not present on this machine            */
    FT_EXIT_VERIFY = 4, /* a result disagreed with the reference                          */
};

typedef struct ft_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    void (*usage)(FILE *f);
} ft_cmd;

extern const ft_cmd ft_cmd_list, ft_cmd_exec, ft_cmd_version;

/* Print "flaretune: <message>" on stderr and return code. */
int ft_cli_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Print err's message and return the exit code for its status. */
int ft_cli_fail_err(const ft_err *err);
int ft_cli_exit_code(ft_status s);

/* "--help" anywhere among the arguments. */
int ft_cli_wants_help(int argc, char **argv);

#endif
