/* tensor.c: dense tensors (see core/tensor.h). */
#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/sanitize.h"

size_t ft_dtype_size(ft_dtype dt) {
    switch (dt) {
    case FT_F32: return 4;
    case FT_F64: return 8;
    case FT_I32: return 4;
    case FT_U8: return 1;
    }
    return 0;
}

const char *ft_dtype_name(ft_dtype dt) {
    switch (dt) {
    case FT_F32: return "float32";
    case FT_F64: return "float64";
    case FT_I32: return "int32";
    case FT_U8: return "uint8";
    }
    return "?";
}

int ft_dtype_is_float(ft_dtype dt) { return dt == FT_F32 || dt == FT_F64; }

/* Every block of ft_alloc carries, just before the address it returns, where the block begins,
 * its length and whether it was mapped, so ft_free can undo either kind. */
typedef struct alloc_head {
    void *base;
    size_t len;
    int mapped;
} alloc_head;
#define ALLOC_HEAD 64 /* the header's room: keeps the address 64-byte aligned */

/* Large buffers (K/V caches, weights) are streamed through by the kernels; with 4 KiB pages a
 * tenth of a decode step was TLB misses. So a buffer of 4 MiB or more is its own mapping,
 * aligned to 2 MiB and asked for huge pages (a hint: without transparent huge pages the call
 * fails harmlessly). A fresh mapping reads as zeros without being written: ft_alloc_zeroed
 * does not touch it (a call's 1 GiB of tensors at full size need not be zeroed page by page
 * before they are filled, nor an output the run never reads back). */
/* Under AddressSanitizer every block comes from the C allocator: it checks only what that
 * hands out. */
#define FT_ALLOC_MAPS (!FT_ASAN)

static void *alloc_block(size_t bytes, int zeroed) {
    const size_t huge = (size_t)2 << 20;
    if (bytes > SIZE_MAX - 2 * huge) return NULL; /* overflow */
    if (FT_ALLOC_MAPS && bytes >= 2 * huge) {
        size_t len = ((bytes + huge - 1) & ~(huge - 1)) + huge;
        void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) return NULL;
        /* base is page-aligned: the next 2 MiB boundary past the header is at most 2 MiB on. */
        uintptr_t at = ((uintptr_t)base + ALLOC_HEAD + huge - 1) & ~(uintptr_t)(huge - 1);
        char *p = (char *)at;
        madvise(p, len - (size_t)(p - (char *)base), MADV_HUGEPAGE);
        alloc_head h = {base, len, 1};
        memcpy(p - sizeof h, &h, sizeof h);
        return p;
    }
    size_t rounded = (bytes + 63) & ~(size_t)63;
    char *base = aligned_alloc(64, rounded + ALLOC_HEAD);
    if (!base) return NULL;
    char *p = base + ALLOC_HEAD;
    if (zeroed) memset(p, 0, bytes);
    alloc_head h = {base, rounded + ALLOC_HEAD, 0};
    memcpy(p - sizeof h, &h, sizeof h);
    return p;
}

void *ft_alloc(size_t bytes) { return alloc_block(bytes, 0); }

void *ft_alloc_zeroed(size_t bytes) { return alloc_block(bytes, 1); }

void ft_free(void *p) {
    if (!p) return;
    alloc_head h;
    memcpy(&h, (char *)p - sizeof h, sizeof h);
    if (h.mapped)
        munmap(h.base, h.len);
    else
        free(h.base);
}

int ft_shape_numel(int rank, const int64_t *shape, int64_t *out) {
    int64_t n = 1;
    int zero = 0, over = 0;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] == 0)
            zero = 1;
        else if (!over && n > FT_MAX_NUMEL / shape[i])
            over = 1;
        else if (!over)
            n *= shape[i];
    }
    if (zero) n = 0, over = 0; /* no elements, however large the other sizes */
    if (over) return 1;
    *out = n;
    return 0;
}

int64_t ft_tensor_numel(const ft_tensor *t) {
    int64_t n;
    return ft_shape_numel(t->rank, t->shape, &n) ? -1 : n;
}

size_t ft_tensor_nbytes(const ft_tensor *t) {
    int64_t n = ft_tensor_numel(t);
    return n < 0 ? 0 : (size_t)n * ft_dtype_size(t->dtype);
}

ft_status ft_tensor_new(ft_dtype dt, int rank, const int64_t *shape, ft_tensor **out, ft_err *err) {
    *out = NULL;
    if (rank < 0 || rank > FT_MAX_RANK)
        return ft_err_set(err, FT_EINVAL, "tensor rank %d is outside 0..%d", rank, FT_MAX_RANK);
    int64_t n = 1;
    int bad = ft_shape_numel(rank, shape, &n);
    if (bad < 0) return ft_err_set(err, FT_EINVAL, "negative tensor dimension");
    if (bad) {
        char s[128];
        return ft_err_set(err, FT_ENOMEM,
                          "a tensor of shape %s is too large to address (its bytes do not fit in "
                          "64 bits)",
                          ft_shape_str(rank, shape, s, sizeof s));
    }
    ft_tensor *t = calloc(1, sizeof *t);
    if (!t) return ft_err_set(err, FT_ENOMEM, "out of memory");
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->shape[i] = shape[i];
    size_t bytes = (size_t)n * ft_dtype_size(dt);
    t->data = ft_alloc_zeroed(bytes);
    if (!t->data) {
        free(t);
        char s[128];
        return ft_err_set(err, FT_ENOMEM, "out of memory allocating a %s %s tensor (%zu bytes)",
                          ft_dtype_name(dt), ft_shape_str(rank, shape, s, sizeof s), bytes);
    }
    t->owns_data = 1;
    *out = t;
    return FT_OK;
}

ft_tensor ft_tensor_wrap(ft_dtype dt, int rank, const int64_t *shape, void *data) {
    ft_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank && i < FT_MAX_RANK; i++)
        t.shape[i] = shape[i];
    t.data = data;
    return t;
}

void ft_tensor_free(ft_tensor *t) {
    if (!t) return;
    if (t->owns_data) ft_free(t->data);
    free(t);
}

double ft_tensor_get(const ft_tensor *t, int64_t i) {
    switch (t->dtype) {
    case FT_F32: return ((const float *)t->data)[i];
    case FT_F64: return ((const double *)t->data)[i];
    case FT_I32: return ((const int32_t *)t->data)[i];
    case FT_U8: return ((const uint8_t *)t->data)[i];
    }
    return 0;
}

void ft_tensor_copy_values(ft_tensor *dst, const ft_tensor *src) {
    int64_t n = ft_tensor_numel(src);
    if (dst->dtype == src->dtype) {
        memcpy(dst->data, src->data, ft_tensor_nbytes(src));
    } else if (dst->dtype == FT_F64) {
        double *d = dst->data;
        for (int64_t i = 0; i < n; i++)
            d[i] = ft_tensor_get(src, i);
    } else if (dst->dtype == FT_F32) {
        float *d = dst->data;
        for (int64_t i = 0; i < n; i++)
            d[i] = (float)ft_tensor_get(src, i);
    } else if (dst->dtype == FT_I32) {
        int32_t *d = dst->data;
        for (int64_t i = 0; i < n; i++)
            d[i] = (int32_t)ft_tensor_get(src, i);
    } else {
        uint8_t *d = dst->data;
        for (int64_t i = 0; i < n; i++)
            d[i] = (uint8_t)ft_tensor_get(src, i);
    }
}

ft_status ft_tensor_convert(const ft_tensor *src, ft_dtype dt, ft_tensor **out, ft_err *err) {
    ft_status s = ft_tensor_new(dt, src->rank, src->shape, out, err);
    if (s) return s;
    ft_tensor_copy_values(*out, src);
    return FT_OK;
}

char *ft_shape_str(int rank, const int64_t *shape, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

uint16_t ft_bf16_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                        /* nearest even */
    return (uint16_t)(u >> 16);
}

float ft_f32_from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float ft_bf16_round(float f) { return ft_f32_from_bf16(ft_bf16_from_f32(f)); }

void ft_tensor_round_bf16(ft_tensor *t) {
    int64_t n = ft_tensor_numel(t);
    if (t->dtype == FT_F32) {
        float *x = t->data;
        for (int64_t i = 0; i < n; i++) x[i] = ft_bf16_round(x[i]);
    } else if (t->dtype == FT_F64) {
        double *x = t->data;
        for (int64_t i = 0; i < n; i++) x[i] = (double)ft_bf16_round((float)x[i]);
    }
}
