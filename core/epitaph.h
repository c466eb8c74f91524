/* epitaph.h: records written as the process ends abnormally, so that a resumed run goes on past
 * the work that ended it.
 *
 * Some failures cannot be returned from: a kernel that reaches past its buffers on the emulator
 * (kernels/cuda/emu_guard.h), a candidate that runs past --candidate-timeout (a launch cannot
 * be stopped part way). Before such work starts, the record of its failure is rendered as it
 * would be written (a Kernel Tuner cache entry, an event log line) and registered here with the
 * descriptor of its file; the handler that ends the process writes every registered record
 * with write(2) alone, async-signal-safe, then its own line. The work's own outcome, when it
 * comes, clears them. One thread registers at a time (the one running the work).
 */
#ifndef FLARETUNE_EPITAPH_H
#define FLARETUNE_EPITAPH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many records may be registered at once (a cache and a log). */
#define FT_EPITAPH_MAX 2

/* Registers n bytes of text for fd (text must outlive the registration); returns 0, or -1 when
 * FT_EPITAPH_MAX are registered already. */
int ft_epitaph_add(int fd, const char *text, size_t n);
/* Forgets every record (the work ended on its own). */
void ft_epitaph_clear(void);
/* Writes every registered record to its file and forgets them; returns how many were written
 * whole. Async-signal-safe, for a handler that is about to end the process. */
int ft_epitaph_write(void);

#ifdef __cplusplus
}
#endif
#endif
