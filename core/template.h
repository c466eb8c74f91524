/* template.h: text files with @NAME@ placeholders, in CMake's configure_file(@ONLY) style.
 *
 * A template is text in which `@NAME@` (NAME: letters, digits and '_', starting with a letter or
 * '_') stands for a value from a table, and `@@` for one literal '@'. A placeholder whose name
 * the table lacks, or an '@' that opens neither, is an error naming the template and its line:
 * a misspelt name never reaches a generated file. Values are put in as they are (an '@' in a
 * value stays). flaretune's emitters keep the fixed text of what they write in such files
 * (profiles/templates/, found under ft_source_root(): paths.h).
 */
#ifndef FLARETUNE_TEMPLATE_H
#define FLARETUNE_TEMPLATE_H

#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One placeholder's name (without the '@'s) and its value. */
typedef struct ft_tvar {
    const char *name;
    const char *value;
} ft_tvar;

/* text with every placeholder replaced from vars[0..nvars) (the first of a name wins), as a new
 * string in *out (the caller frees it; NULL on error). where names the template in messages. */
ft_status ft_template_subst(const char *where, const char *text, const ft_tvar *vars, int nvars,
                            char **out, ft_err *err);

/* The whole file at path as a string in *out (the caller frees it; NULL on error). */
ft_status ft_template_load(const char *path, char **out, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
