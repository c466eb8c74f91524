/* cmd_merge.c: `flaretune merge`: fold profiles into one, keeping the fastest entry per key. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "cli_profile.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune merge OUT IN...\n\n"
               "Merge the profiles IN... into OUT, keeping per key (op, backend, device, shape,\n"
               "attrs) the entry with the lowest median. OUT's own entries take part when it\n"
               "exists, so merging never drops a better result. OUT is written atomically under\n"
               "its lock (OUT.lock), like `tune --profile`; when OUT is a symbolic link, its\n"
               "target is written and locked, and a read-only OUT is refused. Skipped (invalid\n"
               "or stale) entries are named on stderr and carried over unchanged; entries that\n"
               "are not objects are named and dropped. OUT is checked before any input is read:\n"
               "it must be a regular file (or not exist yet), never a pipe or a device.\n");
}

static int run(int argc, char **argv) {
    static const struct option opts[] = {FT_CLI_END};
    int o;
    optind = 0;
    while ((o = ft_cli_getopt(argc, argv, "", opts)) != -1)
        return ft_cli_bad_option("merge", o);
    if (optind >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "merge: which output? (see `flaretune merge --help`)");
    if (optind + 1 >= argc)
        return ft_cli_fail(FT_EXIT_USAGE, "merge: which profiles to merge into %s?", argv[optind]);
    const char *out = argv[optind];
    ft_err err = {0};
    /* OUT first, before any input is read and before OUT itself is opened: a path that is not
     * a regular file (a named pipe, a device), a read-only or malformed profile, a directory
     * where no file can be created are refused in one line, and a pipe is never read. */
    if (ft_profile_check_writable(out, &err))
        return ft_cli_fail(FT_EXIT_FAIL, "merge: %s", err.msg);
    ft_profile *src;
    int code = ft_cli_load_profiles("merge", argv + optind + 1, argc - optind - 1, &src);
    if (code) return code;
    /* OUT's own entries take part too: name the ones it skips or drops (entries that are not
     * objects, which an older flaretune kept) like those of the inputs. A file that does not
     * load is reported by the update below. */
    ft_profile *old = NULL;
    if (ft_profile_load(out, &old, &err) == FT_OK)
        for (int i = 0; i < ft_profile_warning_count(old); i++)
            fprintf(stderr, "flaretune: warning: %s\n", ft_profile_warning_at(old, i));
    ft_profile_free(old);
    if (ft_profile_update_merge(out, src, &err)) {
        ft_profile_free(src);
        return ft_cli_fail(FT_EXIT_FAIL, "merge: %s", err.msg);
    }
    /* Read back what was written: the count the file now holds. */
    ft_profile *now = NULL;
    if (ft_profile_load(out, &now, &err) == FT_OK) {
        printf("%s: %d entries (%d from %d input%s)", out, ft_profile_count(now),
               ft_profile_count(src), argc - optind - 1, argc - optind - 1 == 1 ? "" : "s");
        if (ft_profile_kernel_count(now))
            printf(", %d kernel%s of T1 files (%d from the inputs)", ft_profile_kernel_count(now),
                   ft_profile_kernel_count(now) == 1 ? "" : "s", ft_profile_kernel_count(src));
        printf("\n");
    }
    ft_profile_free(now);
    ft_profile_free(src);
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_merge = {"merge", "merge profiles into one, keeping the fastest entry per key",
                             run, usage};
