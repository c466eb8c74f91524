// Each row scaled by its factor and shifted by a compile-time offset; `tile` elements per
// thread. An extern "C" kernel whose constants come from a header beside it.
#ifndef row_offset
#define row_offset 0.0f
#endif
#ifndef tile
#define tile 1
#endif

#include "rows.h"

extern "C" __global__ void scale_rows(const float *x, const float *scale, float *y, int rows) {
    int r = blockIdx.y;
    if (r >= rows) return;
#pragma unroll tile
    for (int t = 0; t < tile; t++) {
        int c = (blockIdx.x * blockDim.x + threadIdx.x) * tile + t;
        if (c < row_len) y[r * row_len + c] = shifted(x[r * row_len + c] * scale[r]);
    }
}
