/* consumer: run one flaretune op through the installed C API on raw tensors.
 *
 *   consumer BACKEND DEVICE-ID                       print the backend's device fingerprint
 *   consumer BACKEND PROFILE|- OP ATTRS|- MANIFEST DIR [device]
 *
 * MANIFEST lists one tensor per line: "in|out NAME f32|i32|u8 RANK D0 D1 ...". Inputs are read
 * from DIR/NAME.in (raw, row-major), outputs written to DIR/NAME.out. With "device" every float
 * tensor goes through the context's device memory (flaretune_device_alloc). Prints the config
 * the run used and where it came from; on an error prints the API's message and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <flaretune.h>

#define MAXT 16

typedef struct {
    char role[4], name[32], dt[4];
    int rank;
    int64_t shape[6];
    size_t bytes;
    void *host, *dev;
} tensor;

static int die(flaretune_context *ctx, const char *what) {
    fprintf(stderr, "consumer: %s: %s\n", what, ctx ? flaretune_message(ctx) : "no context");
    flaretune_destroy(ctx);
    return 1;
}

static int read_manifest(const char *path, tensor *t, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    *n = 0;
    while (*n < MAXT && fscanf(f, "%3s %31s %3s %d", t[*n].role, t[*n].name, t[*n].dt,
                               &t[*n].rank) == 4) {
        size_t count = 1;
        for (int d = 0; d < t[*n].rank; d++) {
            long long v;
            if (fscanf(f, "%lld", &v) != 1) return -1;
            t[*n].shape[d] = v;
            count *= (size_t)v;
        }
        t[*n].bytes = count * (strcmp(t[*n].dt, "u8") == 0 ? 1 : 4);
        (*n)++;
    }
    fclose(f);
    return 0;
}

static flaretune_dtype dtype_of(const char *dt) {
    return strcmp(dt, "i32") == 0 ? FLARETUNE_I32 : strcmp(dt, "u8") == 0 ? FLARETUNE_U8
                                                                           : FLARETUNE_F32;
}

static int file_io(const char *dir, const tensor *t, const char *ext, int write) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, t->name, ext);
    FILE *f = fopen(path, write ? "wb" : "rb");
    if (!f) return -1;
    size_t done = write ? fwrite(t->host, 1, t->bytes, f) : fread(t->host, 1, t->bytes, f);
    return fclose(f) == 0 && done == t->bytes ? 0 : -1;
}

int main(int argc, char **argv) {
    flaretune_context *ctx = NULL;
    if (argc == 3 && strcmp(argv[2], "device-id") == 0) {
        if (flaretune_create(&ctx, argv[1])) return die(ctx, "create");
        printf("%s\n", flaretune_device(ctx));
        flaretune_destroy(ctx);
        return 0;
    }
    if (argc < 7) {
        fprintf(stderr, "usage: consumer BACKEND PROFILE|- OP ATTRS|- MANIFEST DIR [device]\n");
        return 2;
    }
    int on_device = argc > 7 && strcmp(argv[7], "device") == 0;
    tensor t[MAXT];
    int n;
    if (read_manifest(argv[5], t, &n)) {
        fprintf(stderr, "consumer: %s: bad manifest\n", argv[5]);
        return 2;
    }
    if (flaretune_create(&ctx, argv[1])) return die(ctx, "create");
    if (strcmp(argv[2], "-") && flaretune_load_profile(ctx, argv[2], 0))
        return die(ctx, "profile");
    for (int i = 0; i < n; i++) {
        t[i].host = calloc(1, t[i].bytes + 1);
        t[i].dev = NULL;
        if (strcmp(t[i].role, "in") == 0 && file_io(argv[6], &t[i], "in", 0)) {
            fprintf(stderr, "consumer: cannot read %s/%s.in\n", argv[6], t[i].name);
            return 1;
        }
        void *data = t[i].host;
        flaretune_memory mem = FLARETUNE_HOST;
        if (on_device && strcmp(t[i].dt, "f32") == 0) {
            if (flaretune_device_alloc(ctx, t[i].bytes, &t[i].dev) ||
                flaretune_device_copy(ctx, t[i].dev, t[i].host, t[i].bytes,
                                      FLARETUNE_HOST_TO_DEVICE))
                return die(ctx, "device memory");
            data = t[i].dev;
            mem = FLARETUNE_DEVICE;
        }
        if (flaretune_bind(ctx, t[i].name, data, dtype_of(t[i].dt), t[i].rank, t[i].shape, mem))
            return die(ctx, "bind");
    }
    if (flaretune_run(ctx, argv[3], strcmp(argv[4], "-") ? argv[4] : NULL, NULL))
        return die(ctx, "run");
    printf("config %s\nfrom %s\n", flaretune_last_config(ctx), flaretune_last_config_source(ctx));
    for (int i = 0; i < n; i++) {
        if (t[i].dev) {
            if (flaretune_device_copy(ctx, t[i].host, t[i].dev, t[i].bytes,
                                      FLARETUNE_DEVICE_TO_HOST))
                return die(ctx, "device memory");
            flaretune_device_free(ctx, t[i].dev);
        }
        if (strcmp(t[i].role, "out") == 0 && file_io(argv[6], &t[i], "out", 1)) {
            fprintf(stderr, "consumer: cannot write %s/%s.out\n", argv[6], t[i].name);
            return 1;
        }
        free(t[i].host);
    }
    flaretune_destroy(ctx);
    return 0;
}
