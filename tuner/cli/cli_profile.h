/* cli_profile.h: what `show`, `merge`, `emit`, `step` and `report` share: reading the profiles
 * named on the command line. */
#ifndef FLARETUNE_CLI_PROFILE_H
#define FLARETUNE_CLI_PROFILE_H

#include "profiles/src/profile.h"

/* Load every path (each must exist: a missing profile named on the command line is an error,
 * unlike the store, which reads it as empty) and merge them into one profile, best per key.
 * Warnings about skipped entries go to stderr. Returns an exit code (0: *out is set). */
int ft_cli_load_profiles(const char *cmd, char **paths, int n, ft_profile **out);
/* The one profile a run takes its configurations from (--profile PATH), which must be readable.
 * Returns an exit code (0: *out is set). */
int ft_cli_read_profile(const char *cmd, const char *path, ft_profile **out);

#endif
