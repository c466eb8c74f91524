/* cli_profile.c: reading the profiles named on the command line (see cli_profile.h). */
#include "cli_profile.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* What loading read differently from what the file says (entries skipped, names renamed). */
static void say_warnings(const ft_profile *p) {
    for (int i = 0; i < ft_profile_warning_count(p); i++)
        fprintf(stderr, "flaretune: warning: %s\n", ft_profile_warning_at(p, i));
    for (int i = 0; i < ft_profile_note_count(p); i++)
        fprintf(stderr, "flaretune: note: %s\n", ft_profile_note_at(p, i));
}

int ft_cli_load_profiles(const char *cmd, char **paths, int n, ft_profile **out) {
    *out = NULL;
    ft_profile *all = ft_profile_new();
    if (!all) return ft_cli_fail(FT_EXIT_FAIL, "%s: out of memory", cmd);
    ft_err err = {0};
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            int e = errno;
            ft_profile_free(all);
            return ft_cli_fail(FT_EXIT_FAIL, "%s: %s: %s", cmd, paths[i],
                               e == ENOENT ? "no such profile" : strerror(e));
        }
        if (S_ISDIR(st.st_mode)) {
            ft_profile_free(all);
            return ft_cli_fail(FT_EXIT_FAIL, "%s: %s: is a directory, not a profile", cmd,
                               paths[i]);
        }
        ft_profile *p = NULL;
        if (ft_profile_load(paths[i], &p, &err) || ft_profile_merge(all, p, &err)) {
            ft_profile_free(p);
            ft_profile_free(all);
            return ft_cli_fail(FT_EXIT_FAIL, "%s: %s", cmd, err.msg);
        }
        ft_profile_free(p);
    }
    say_warnings(all);
    *out = all;
    return FT_EXIT_OK;
}

int ft_cli_read_profile(const char *cmd, const char *path, ft_profile **out) {
    *out = NULL;
    if (access(path, R_OK) != 0)
        return ft_cli_fail(FT_EXIT_FAIL, "%s: cannot read profile %s: %s", cmd, path,
                           strerror(errno));
    ft_err err = {0};
    if (ft_profile_load(path, out, &err)) return ft_cli_fail(FT_EXIT_FAIL, "%s: %s", cmd, err.msg);
    say_warnings(*out);
    return FT_EXIT_OK;
}
