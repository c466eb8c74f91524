/* driver.c: a fuzz target without libFuzzer: feeds it every file of the directories (or the
 * files) given on the command line, in name order, once each.
 *
 *   fuzz_npy_corpus tests/fuzz/corpus/npy [MORE...]
 *
 * This is how the corpus, and every reproducer added to it, is replayed by ctest in every
 * build (the sanitizer build included). A finding aborts; the last "input:" line on stderr
 * names the file. Fails when it found no input at all (a wrong path is not a pass).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                fprintf(stderr, "%s: out of memory\n", path);
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: read failed\n", path);
        free(buf);
        return -1;
    }
    fprintf(stderr, "input: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir whose name does not start with '.', in name order. */
static int run_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: cannot open: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
        }
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            rc = -1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!rc && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(names[i]))
                rc = -1;
            else
                (*count)++;
        }
        free(names[i]);
    }
    free(names);
    if (rc) fprintf(stderr, "%s: could not run every input\n", dir);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    int count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        if (S_ISDIR(st.st_mode) ? run_dir(argv[i], &count) : run_file(argv[i])) return 1;
        if (!S_ISDIR(st.st_mode)) count++;
    }
    if (count == 0) {
        fprintf(stderr, "no inputs found in the arguments\n");
        return 1;
    }
    printf("%s: %d inputs, no finding\n", argv[0], count);
    return 0;
}
