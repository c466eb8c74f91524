// CUDA's vector types, as a kernel from elsewhere uses them: their sizes and alignments asserted
// (NVRTC holds them to the toolkit's vector_types.h, the emulator to its own), and a kernel that
// adds a double3 to every element, scales a short4 and widens a uchar3 through the make_ functions.
#define SIZE_ALIGN(T, S, A) static_assert(sizeof(T) == (S) && alignof(T) == (A), #T)
#define FAMILY(N, B)                                                                               \
    SIZE_ALIGN(N##1, sizeof(B), alignof(B));                                                       \
    SIZE_ALIGN(N##3, 3 * sizeof(B), alignof(B))
FAMILY(char, signed char);
FAMILY(uchar, unsigned char);
FAMILY(short, short);
FAMILY(ushort, unsigned short);
FAMILY(int, int);
FAMILY(uint, unsigned);
FAMILY(long, long);
FAMILY(ulong, unsigned long);
FAMILY(longlong, long long);
FAMILY(ulonglong, unsigned long long);
FAMILY(float, float);
FAMILY(double, double);
SIZE_ALIGN(char2, 2, 2);
SIZE_ALIGN(char4, 4, 4);
SIZE_ALIGN(uchar2, 2, 2);
SIZE_ALIGN(uchar4, 4, 4);
SIZE_ALIGN(short2, 4, 4);
SIZE_ALIGN(short4, 8, 8);
SIZE_ALIGN(ushort2, 4, 4);
SIZE_ALIGN(ushort4, 8, 8);
SIZE_ALIGN(int2, 8, 8);
SIZE_ALIGN(int4, 16, 16);
SIZE_ALIGN(uint2, 8, 8);
SIZE_ALIGN(uint4, 16, 16);
SIZE_ALIGN(long2, 16, 16);
SIZE_ALIGN(ulong2, 16, 16);
SIZE_ALIGN(longlong2, 16, 16);
SIZE_ALIGN(ulonglong2, 16, 16);
SIZE_ALIGN(float2, 8, 8);
SIZE_ALIGN(float4, 16, 16);
SIZE_ALIGN(double2, 16, 16);

__device__ double3 operator+(const double3 &a, const double3 &b) {
    return make_double3(a.x + b.x, a.y + b.y, a.z + b.z);
}

// out[i] = in[i] + *add; s[i] = s[i] * k (each lane); w[i] = (float) of c[i]'s bytes, summed.
extern "C" __global__ void vec_mix(const double3 *in, const double3 *add, double3 *out, short4 *s,
                                   short k, const uchar3 *c, float *w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = in[i] + add[0];
    short4 v = s[i];
    s[i] = make_short4(v.x * k, v.y * k, v.z * k, v.w * k);
    uchar3 b = c[i];
    float1 f = make_float1((float)b.x + (float)b.y + (float)b.z);
    w[i] = f.x;
}
