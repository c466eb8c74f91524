// A kernel that does not compile: the error names this file and line.
__global__ void broken(float *out) {
    out[threadIdx.x] = undeclared_value;
}
