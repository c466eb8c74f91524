/* epitaph.h: records written as the process ends abnormally, so that a resumed run goes on past
 * the work that ended it.
 *
 * Some failures cannot be returned from: a kernel that reaches past its buffers on the emulator
 * (kernels/cuda/emu_guard.h), a candidate that runs past --candidate-timeout (a launch cannot
 * be stopped part way). Before such work starts, the record of its failure is rendered as it
 * would be written (a Kernel Tuner cache entry, an event log line) and registered here with the
 * descriptor of its file; the handler that ends the process writes every registered record
 * with write(2) alone, async-signal-safe, then its own line. The work clears them before it
 * writes its own outcome. One thread registers at a time (the one running the work); a record's
 * text must stay allocated until the next registration after it was cleared (a handler on
 * another thread may be writing it as it is cleared).
 *
 * A full-screen display (the dashboard) registers how to give the terminal back, written and
 * applied first, so that the handler's line lands on a usable terminal.
 */
#ifndef FLARETUNE_EPITAPH_H
#define FLARETUNE_EPITAPH_H

#include <stddef.h>
#include <termios.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many records may be registered at once (a cache and a log). */
#define FT_EPITAPH_MAX 2

/* Registers n bytes of text for fd (see above for how long text must live); resumed: 1 when a
 * resumed run reads this file to go on past the work (a Kernel Tuner cache for tune --t1, the
 * event log for an op's tune), 0 when it only informs (tune --t1's log). Returns 0, or -1 when
 * FT_EPITAPH_MAX are registered already. */
int ft_epitaph_add(int fd, const char *text, size_t n, int resumed);
/* Forgets every record (the work is about to write its own outcome, or has ended). */
void ft_epitaph_clear(void);
/* Writes every registered record to its file and forgets them, after giving the terminal back;
 * returns how many of the records a resumed run reads were written whole. Async-signal-safe,
 * for a handler that is about to end the process. */
int ft_epitaph_write(void);

/* The terminal fd to give back as the process ends: n bytes of restore (the escape sequences
 * that leave the full-screen mode; must outlive the registration) written to it, and its
 * settings set to *saved (copied). fd -1 forgets it (the display ended normally). */
void ft_epitaph_terminal(int fd, const char *restore, size_t n, const struct termios *saved);

#ifdef __cplusplus
}
#endif
#endif
