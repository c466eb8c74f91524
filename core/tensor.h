/* tensor.h: dense row-major tensors, the unit every op reads and writes.
 *
 * A tensor owns its data (64-byte aligned so vector loads never straddle a cache line) unless it
 * was made with ft_tensor_wrap. Shapes are int64 so the largest real problems (an LM head of
 * 201088 x 4096) index without overflow.
 */
#ifndef FLARETUNE_TENSOR_H
#define FLARETUNE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_MAX_RANK 6

typedef enum ft_dtype {
    FT_F32 = 0,
    FT_F64,
    FT_I32,
    FT_U8,
} ft_dtype;

typedef struct ft_tensor {
    ft_dtype dtype;
    int rank;
    int64_t shape[FT_MAX_RANK];
    void *data;
    int owns_data;
} ft_tensor;

size_t ft_dtype_size(ft_dtype dt);
const char *ft_dtype_name(ft_dtype dt); /* "float32", "float64", "int32", "uint8" */
int ft_dtype_is_float(ft_dtype dt);

/* New tensor with zeroed data. rank 0 is a scalar (one element). Fails with FT_ENOMEM. */
ft_status ft_tensor_new(ft_dtype dt, int rank, const int64_t *shape, ft_tensor **out, ft_err *err);
/* A tensor that points at memory it does not own. */
ft_tensor ft_tensor_wrap(ft_dtype dt, int rank, const int64_t *shape, void *data);
void ft_tensor_free(ft_tensor *t);

/* The most elements a tensor may have: its bytes, even as float64 (the reference's copy), fit
 * in 63 bits. Every size product of a call stays below it (ft_call_bind refuses more). */
#define FT_MAX_NUMEL (INT64_MAX / 8)

/* The element count of a shape: 0 when it fits under FT_MAX_NUMEL (*out set), -1 for a negative
 * dimension, 1 when the product is larger (checked factor by factor: it never wraps). */
int ft_shape_numel(int rank, const int64_t *shape, int64_t *out);
/* The tensor's element count; -1 when ft_shape_numel refuses its shape (a tensor of a bound
 * call never has such a shape), and then ft_tensor_nbytes is 0. */
int64_t ft_tensor_numel(const ft_tensor *t);
size_t ft_tensor_nbytes(const ft_tensor *t);

/* Element i as a double, whatever the dtype. */
double ft_tensor_get(const ft_tensor *t, int64_t i);
/* Convert into a new tensor of dtype dt (float <-> float, or identity copies). */
ft_status ft_tensor_convert(const ft_tensor *src, ft_dtype dt, ft_tensor **out, ft_err *err);
/* Copy values of src into dst (same numel; float conversions allowed). */
void ft_tensor_copy_values(ft_tensor *dst, const ft_tensor *src);

/* bfloat16, the storage of dtype=bf16: the upper half of a float32, rounded to nearest even
 * (NaN stays NaN), as the device's __float2bfloat16 rounds. */
uint16_t ft_bf16_from_f32(float f);
float ft_f32_from_bf16(uint16_t h);
/* The float32 a value becomes when stored in bf16 and read back. */
float ft_bf16_round(float f);
/* Round every element of a float tensor (f32 or f64) to bf16 in place, as a device backend
 * stores it with dtype=bf16; other dtypes are left alone. */
void ft_tensor_round_bf16(ft_tensor *t);

/* "[3, 4, 5]" into buf (for messages). Returns buf. */
char *ft_shape_str(int rank, const int64_t *shape, char *buf, size_t n);

/* Aligned allocation used for tensors and kernel scratch (free with ft_free). NULL on failure.
 * ft_alloc_zeroed's bytes read as zeros; a large block is a fresh mapping, zero without being
 * written, so its pages are only made when first used. */
void *ft_alloc(size_t bytes);
void *ft_alloc_zeroed(size_t bytes);
void ft_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
