/* epitaph.c: records written as the process ends abnormally (see core/epitaph.h). */
#include "core/epitaph.h"

#include <stdatomic.h>
#include <unistd.h>

/* A slot holds fd + 1 while it is live (0: free); the descriptor is stored last and taken
 * first, so a handler never pairs it with another record's text. */
static _Atomic int slots[FT_EPITAPH_MAX];
static const char *_Atomic texts[FT_EPITAPH_MAX];
static _Atomic size_t lens[FT_EPITAPH_MAX];

int ft_epitaph_add(int fd, const char *text, size_t n) {
    if (fd < 0 || !text) return -1;
    for (int i = 0; i < FT_EPITAPH_MAX; i++) {
        if (atomic_load(&slots[i])) continue;
        atomic_store(&texts[i], text);
        atomic_store(&lens[i], n);
        atomic_store(&slots[i], fd + 1);
        return 0;
    }
    return -1;
}

void ft_epitaph_clear(void) {
    for (int i = 0; i < FT_EPITAPH_MAX; i++)
        atomic_store(&slots[i], 0);
}

int ft_epitaph_write(void) {
    int whole = 0;
    for (int i = 0; i < FT_EPITAPH_MAX; i++) {
        const int fd = atomic_exchange(&slots[i], 0) - 1;
        if (fd < 0) continue;
        const char *text = atomic_load(&texts[i]);
        size_t left = atomic_load(&lens[i]);
        while (left > 0) {
            const ssize_t w = write(fd, text, left);
            if (w <= 0) break;
            text += w;
            left -= (size_t)w;
        }
        whole += left == 0;
    }
    return whole;
}
