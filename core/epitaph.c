/* epitaph.c: records written as the process ends abnormally (see core/epitaph.h). */
#include "core/epitaph.h"

#include <stdatomic.h>
#include <unistd.h>

/* A slot holds fd + 1 while it is live (0: free); the descriptor is stored last and taken
 * first, so a handler never pairs it with another record's text. */
static _Atomic int slots[FT_EPITAPH_MAX];
static const char *_Atomic texts[FT_EPITAPH_MAX];
static _Atomic size_t lens[FT_EPITAPH_MAX];
static atomic_int resumes[FT_EPITAPH_MAX];

/* The terminal: its fd + 1 (0: none), what leaves the full-screen mode, its settings. */
static _Atomic int tty;
static const char *_Atomic tty_restore;
static _Atomic size_t tty_len;
static struct termios tty_saved;

int ft_epitaph_add(int fd, const char *text, size_t n, int resumed) {
    if (fd < 0 || !text) return -1;
    for (int i = 0; i < FT_EPITAPH_MAX; i++) {
        if (atomic_load(&slots[i])) continue;
        atomic_store(&texts[i], text);
        atomic_store(&lens[i], n);
        atomic_store(&resumes[i], resumed != 0);
        atomic_store(&slots[i], fd + 1);
        return 0;
    }
    return -1;
}

void ft_epitaph_clear(void) {
    for (int i = 0; i < FT_EPITAPH_MAX; i++)
        atomic_store(&slots[i], 0);
}

void ft_epitaph_terminal(int fd, const char *restore, size_t n, const struct termios *saved) {
    atomic_store(&tty, 0);
    if (fd < 0 || !restore || !saved) return;
    tty_saved = *saved;
    atomic_store(&tty_restore, restore);
    atomic_store(&tty_len, n);
    atomic_store(&tty, fd + 1);
}

/* All of n bytes of text to fd; 1 when they were written whole. */
static int write_all(int fd, const char *text, size_t n) {
    while (n > 0) {
        const ssize_t w = write(fd, text, n);
        if (w <= 0) return 0;
        text += w;
        n -= (size_t)w;
    }
    return 1;
}

int ft_epitaph_write(void) {
    const int t = atomic_exchange(&tty, 0) - 1;
    if (t >= 0) {
        write_all(t, atomic_load(&tty_restore), atomic_load(&tty_len));
        tcsetattr(t, TCSANOW, &tty_saved);
    }
    int whole = 0;
    for (int i = 0; i < FT_EPITAPH_MAX; i++) {
        const int fd = atomic_exchange(&slots[i], 0) - 1;
        if (fd < 0) continue;
        const int ok = write_all(fd, atomic_load(&texts[i]), atomic_load(&lens[i]));
        whole += ok && atomic_load(&resumes[i]);
    }
    return whole;
}
