// Fused elementwise kernels for the gpu backend. Grid-stride loops over n elements.
//
// relu_backward: the op record's dx = dy * (y > 0), as numpy multiplies by the mask: where y <= 0 or is NaN,
// dy * 0 (NaN for an inf or NaN dy, -0 for a negative one), written as a select so that a dy that passes is
// moved, not multiplied (CuPy compiles with -ftz=true: a multiply would flush a subnormal dy, a move does not).

extern "C" __global__ void relu_backward_f32(const float* y, const float* dy, float* dx, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        const float g = dy[i];
        dx[i] = y[i] > 0.0f ? g : g * 0.0f;
    }
}

extern "C" __global__ void relu_backward_f64(const double* y, const double* dy, double* dx, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        const double g = dy[i];
        dx[i] = y[i] > 0.0 ? g : g * 0.0;
    }
}
