// Fused elementwise kernels for the gpu backend. Grid-stride loops over n elements.

extern "C" __global__ void relu_backward_f32(const float* y, const float* dy, float* dx, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
}

extern "C" __global__ void relu_backward_f64(const double* y, const double* dy, double* dx, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        dx[i] = y[i] > 0.0 ? dy[i] : 0.0;
    }
}
