// A 5x5 weighted stencil over an image with clamped borders, in the style of kernels written
// for other tuners: C++ linkage, tunables as macros with defaults, the weights in constant
// memory filled by the host, the tile in a static shared array sized by the macros.

#ifndef block_size_x
#define block_size_x 16
#endif
#ifndef block_size_y
#define block_size_y 8
#endif
#ifndef radius
#define radius 2
#endif
#define diameter (2 * radius + 1)
#define tile_w (block_size_x + 2 * radius)
#define tile_h (block_size_y + 2 * radius)

__constant__ float coef[diameter * diameter];

__device__ float clampf(float v, float lo, float hi) { return min(max(v, lo), hi); }

__global__ void stencil(float *out, const float *in, int width, int height, float lo, float hi) {
    __shared__ float tile[tile_h][tile_w];
    int x0 = blockIdx.x * block_size_x - radius;
    int y0 = blockIdx.y * block_size_y - radius;
    for (int i = threadIdx.y; i < tile_h; i += block_size_y) {
        for (int j = threadIdx.x; j < tile_w; j += block_size_x) {
            int y = min(max(y0 + i, 0), height - 1);
            int x = min(max(x0 + j, 0), width - 1);
            tile[i][j] = __ldg(in + y * width + x);
        }
    }
    __syncthreads();
    int x = blockIdx.x * block_size_x + threadIdx.x;
    int y = blockIdx.y * block_size_y + threadIdx.y;
    if (x >= width || y >= height) return;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < diameter; i++) {
#pragma unroll
        for (int j = 0; j < diameter; j++) {
            sum += tile[threadIdx.y + i][threadIdx.x + j] * coef[i * diameter + j];
        }
    }
    out[y * width + x] = clampf(sum, lo, hi);
}

// Four weights of the table applied to each float4 of the input.
__global__ void dot4(float *out, const float4 *in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 v = __ldg(&in[i]);
        out[i] = v.x * coef[0] + v.y * coef[1] + v.z * coef[2] + v.w * coef[3];
    }
}
