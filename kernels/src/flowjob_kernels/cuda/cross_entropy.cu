// Sparse softmax cross entropy, forward and backward, for the gpu backend.
//
// Forward: one block per row (a grid-stride loop over rows), its threads striding over the classes.
// prob = exp(x - max) / sum, loss = log(sum) - (x[label] - max): the label is picked before the
// exponential, so a probability that underflows still gives a finite loss. A label outside
// [0, classes) adds zero loss (legacy's split-class semantics) and is counted in *bad, which the
// host reads back until it has warned once.
// Backward: dx = (prob - onehot(label)) * dy, a grid-stride loop over every element; a row whose
// label is out of range gets zeros.
// Launch the forward with a block size that is a multiple of 32, at most 1024.

template <typename T> __device__ T neutral_max();
// -infinity from its bits: NVRTC (CuPy's compiler) includes no math.h, so there is no INFINITY macro
template <> __device__ float neutral_max<float>() { return __int_as_float(0xff800000); }
template <> __device__ double neutral_max<double>() { return __longlong_as_double(0xfff0000000000000LL); }

template <typename T> __device__ T warp_max(T v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

template <typename T> __device__ T warp_sum(T v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// Every thread of the block gets the block's maximum (is_max) or sum of v; `shared` holds 32 values.
template <typename T> __device__ T block_reduce(T v, T* shared, bool is_max) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = threadIdx.x < warps ? shared[threadIdx.x] : (is_max ? neutral_max<T>() : T(0));
        v = is_max ? warp_max(v) : warp_sum(v);
        if (threadIdx.x == 0) shared[0] = v;
    }
    __syncthreads();
    const T result = shared[0];
    __syncthreads();  // shared is reused by the next reduction
    return result;
}

template <typename T>
__device__ void softmax_xent_rows(const T* logits, const long long* labels, T* prob, T* loss, int* bad,
                                  long long rows, long long classes) {
    __shared__ T shared[32];
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* x = logits + row * classes;
        T* p = prob + row * classes;
        T top = neutral_max<T>();
        for (long long c = threadIdx.x; c < classes; c += blockDim.x) top = max(top, x[c]);
        top = block_reduce(top, shared, true);
        T total = T(0);
        for (long long c = threadIdx.x; c < classes; c += blockDim.x) {
            const T e = exp(x[c] - top);
            p[c] = e;
            total += e;
        }
        total = block_reduce(total, shared, false);
        for (long long c = threadIdx.x; c < classes; c += blockDim.x) p[c] = p[c] / total;
        if (threadIdx.x == 0) {
            const long long label = labels[row];
            if (label >= 0 && label < classes) {
                loss[row] = log(total) - (x[label] - top);
            } else {
                loss[row] = T(0);
                atomicAdd(bad, 1);
            }
        }
    }
}

template <typename T>
__device__ void softmax_xent_backward(const T* prob, const long long* labels, const T* dy, T* dx, long long rows,
                                      long long classes) {
    const long long n = rows * classes;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        const long long row = i / classes, c = i - row * classes;
        const long long label = labels[row];
        if (label < 0 || label >= classes) {
            dx[i] = T(0);
        } else {
            dx[i] = prob[i] * dy[row] - (c == label ? dy[row] : T(0));
        }
    }
}

extern "C" __global__ void sparse_softmax_xent_f32(const float* logits, const long long* labels, float* prob,
                                                   float* loss, int* bad, long long rows, long long classes) {
    softmax_xent_rows(logits, labels, prob, loss, bad, rows, classes);
}

extern "C" __global__ void sparse_softmax_xent_f64(const double* logits, const long long* labels, double* prob,
                                                   double* loss, int* bad, long long rows, long long classes) {
    softmax_xent_rows(logits, labels, prob, loss, bad, rows, classes);
}

extern "C" __global__ void sparse_softmax_xent_backward_f32(const float* prob, const long long* labels,
                                                            const float* dy, float* dx, long long rows,
                                                            long long classes) {
    softmax_xent_backward(prob, labels, dy, dx, rows, classes);
}

extern "C" __global__ void sparse_softmax_xent_backward_f64(const double* prob, const long long* labels,
                                                            const double* dy, double* dx, long long rows,
                                                            long long classes) {
    softmax_xent_backward(prob, labels, dy, dx, rows, classes);
}
