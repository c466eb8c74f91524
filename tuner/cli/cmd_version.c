/* cmd_version.c: `flaretune version`: the version and what this binary was built with. */
#include <curses.h>
#include <jansson.h>
#include <stdio.h>

#include "cli.h"
#include "core/paths.h"
#include "core/env.h"
#include "flaretune/version.h"

static void usage(FILE *f) {
    fprintf(f, "usage: flaretune version\n\n"
               "Print flaretune's version and the libraries this binary was built with.\n");
}

static int run(int argc, char **argv) {
    (void)argv;
    if (argc > 1) return ft_cli_fail(FT_EXIT_USAGE, "version takes no arguments");
    ft_env e;
    ft_env_probe(&e);
    printf("flaretune %s\n", e.version);
    printf("  compiler   %s\n", e.compiler);
    printf("  cuda       %s\n",
           e.cuda_built ? "built (NVRTC, CUPTI, NVTX, cuBLASLt)" : "not built");
    printf("  blas       %s\n", e.blas);
    if (e.blas_core_detected[0])
        printf("  blas core  %s (OpenBLAS detected %s; restarted with OPENBLAS_CORETYPE=%s)\n",
               e.blas_core, e.blas_core_detected, e.blas_core);
    else
        printf("  blas core  %s\n", e.blas_core);
    printf("  jansson    %s\n", JANSSON_VERSION);
    printf("  ncurses    %s\n", NCURSES_VERSION);
    printf("  openmp     %d threads by default\n", e.omp_threads);
    char dev[256];
    ft_env_device(&e, "cpu", dev, sizeof dev);
    printf("  cpus       %d of %d online usable (the profile's device: %s)\n", e.usable_cpus,
           e.cpu_cores, dev);
    printf("  mpi        %s\n", FT_HAVE_MPI ? "built (mpirun flaretune tune: docs/distributed.md)"
                                             : "not built");
    printf("  sources    %s (kernels compiled at run time; paths.h)\n", ft_source_root());
    return FT_EXIT_OK;
}

const ft_cmd ft_cmd_version = {"version", "print the version and build configuration", run, usage};
