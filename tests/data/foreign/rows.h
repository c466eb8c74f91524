// Constants and a helper of rows.cu, included with quotes from the kernel's own folder.
#define row_len 37

__device__ inline float shifted(float v) { return v + row_offset; }
