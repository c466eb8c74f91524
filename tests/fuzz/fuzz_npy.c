/* fuzz_npy.c: the .npy reader (core/npy.c) on arbitrary bytes.
 *
 * Exercises ft_npy_parse_header on the input as a buffer and ft_npy_load on it as a file: the
 * magic string, the three format versions' length prefixes, the header's dict literal, dtypes,
 * shapes, the int64 narrowing and bool conversion, truncated data and trailing bytes.
 *
 * A finding, besides a sanitizer report, a leak, a timeout or an allocation past the fuzzer's
 * limit (a small file must not make the reader allocate what its header merely claims): a
 * failure without its status and message in ft_err; a parsed header whose data offset lies
 * outside the input, or with a rank, shape or descr out of range; a tensor loaded from a file
 * whose header does not parse, whose rank, shape or dtype differ from the header's, whose data
 * does not fill the file exactly, or whose values differ from the file's bytes (after the
 * documented conversions).
 */
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "fuzz.h"

/* The element size in the file and the tensor dtype a descr loads as (0: refused). */
static size_t file_elem(const char *descr, ft_dtype *dt) {
    static const struct {
        const char *descr;
        size_t size;
        ft_dtype dt;
    } known[] = {{"<f4", 4, FT_F32}, {"<f8", 8, FT_F64}, {"<i4", 4, FT_I32}, {"<i8", 8, FT_I32},
                 {"|u1", 1, FT_U8},  {"<u1", 1, FT_U8},  {"|b1", 1, FT_U8}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(descr, known[i].descr) == 0) {
            *dt = known[i].dt;
            return known[i].size;
        }
    return 0;
}

static void check_header(const ft_npy_header *h, size_t size) {
    FUZZ_CHECK(h->major >= 1 && h->major <= 3, "parsed a header of version %d", h->major);
    FUZZ_CHECK(h->data_offset <= size, "data offset %zu past the end of %zu bytes", h->data_offset,
               size);
    FUZZ_CHECK(h->rank >= 0 && h->rank <= FT_MAX_RANK, "rank %d", h->rank);
    for (int i = 0; i < h->rank; i++)
        FUZZ_CHECK(h->shape[i] >= 0, "negative dimension %lld", (long long)h->shape[i]);
    FUZZ_CHECK(memchr(h->descr, '\0', sizeof h->descr) != NULL, "descr not terminated");
    FUZZ_CHECK(h->fortran_order == 0 || h->fortran_order == 1, "fortran_order %d",
               h->fortran_order);
}

/* The loaded tensor against the header and the bytes of the file. */
static void check_tensor(const ft_tensor *t, const ft_npy_header *h, const uint8_t *data,
                         size_t size) {
    ft_dtype want_dt = FT_F32;
    size_t esz = file_elem(h->descr, &want_dt);
    FUZZ_CHECK(esz, "loaded a tensor of descr '%s', which the reader documents as refused",
               h->descr);
    FUZZ_CHECK(!h->fortran_order, "loaded a Fortran-order array");
    FUZZ_CHECK(t->dtype == want_dt, "descr '%s' loaded as %s", h->descr, ft_dtype_name(t->dtype));
    FUZZ_CHECK(t->rank == h->rank, "rank %d loaded as %d", h->rank, t->rank);
    for (int i = 0; i < t->rank; i++)
        FUZZ_CHECK(t->shape[i] == h->shape[i], "dimension %d: %lld loaded as %lld", i,
                   (long long)h->shape[i], (long long)t->shape[i]);
    int64_t n = ft_tensor_numel(t);
    FUZZ_CHECK(n >= 0 && h->data_offset + (size_t)n * esz == size,
               "%lld elements of %zu bytes at offset %zu do not fill a file of %zu bytes",
               (long long)n, esz, h->data_offset, size);
    const uint8_t *src = data + h->data_offset;
    if (!strcmp(h->descr, "<i8")) {
        const int32_t *d = t->data;
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, src + (size_t)i * 8, 8);
            FUZZ_CHECK(d[i] == v, "int64 element %lld: %lld loaded as %d", (long long)i,
                       (long long)v, d[i]);
        }
    } else if (!strcmp(h->descr, "|b1")) {
        const uint8_t *d = t->data;
        for (int64_t i = 0; i < n; i++)
            FUZZ_CHECK(d[i] == (src[i] != 0), "bool element %lld: byte %d loaded as %d",
                       (long long)i, src[i], d[i]);
    } else {
        FUZZ_CHECK(n == 0 || memcmp(t->data, src, (size_t)n * esz) == 0,
                   "the data differ from the file's bytes");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ft_npy_header h;
    ft_err err = {0};
    ft_status hs = ft_npy_parse_header(data, size, "input.npy", &h, &err);
    fuzz_check_err(hs, &err, "ft_npy_parse_header");
    if (hs == FT_OK) check_header(&h, size);

    ft_tensor *t = NULL;
    ft_err lerr = {0};
    ft_status ls = ft_npy_load(fuzz_input_path(data, size), &t, &lerr);
    if (!fuzz_loaded(ls, &lerr, t, "ft_npy_load")) return 0;
    FUZZ_CHECK(t != NULL, "ft_npy_load succeeded without a tensor");
    FUZZ_CHECK(hs == FT_OK, "ft_npy_load read a file whose header does not parse (%s)", err.msg);
    check_tensor(t, &h, data, size);
    ft_tensor_free(t);
    return 0;
}
