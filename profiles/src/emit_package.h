/* emit_package.h: what the files of the package emitter share (internal to profiles/src;
 * docs/emit.md, "--format package"). emit_package.c writes the package; the fixed text of its
 * runtime is in emit_package_runtime.c. */
#ifndef FT_PROFILES_EMIT_PACKAGE_H
#define FT_PROFILES_EMIT_PACKAGE_H

#include "profiles/src/profile.h"

/* The package's lookup and run (src/@P@_runtime.c), with @P@ standing for the prefix and @U@
 * for it in upper case. */
extern const char *const ft_package_runtime_c;
/* The lookup of a CUDA package (src/@P@_runtime.c), with the same placeholders. */
extern const char *const ft_package_cuda_runtime_c;
/* The run of a CUDA package (src/@P@_run.c): a bucket through the copied CUDA backend. */
extern const char *const ft_package_cuda_run_c;
/* The bucket lookup both runs include (src/P_lookup.inc). */
extern const char *const ft_package_lookup_inc;
/* The header the package's tables and runtime share (src/@P@_internal.h). */
extern const char *const ft_package_internal_h;

#endif
