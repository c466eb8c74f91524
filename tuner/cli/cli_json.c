/* cli_json.c: how a command prints a JSON document on standard output (--json), so every command
 * writes it alike. */
#include <jansson.h>
#include <stdio.h>

#include "cli.h"

void ft_cli_print_json(json_t *doc) {
    json_dumpf(doc, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(doc);
}
