// Train-mode batch normalization, forward and backward, for the gpu backend: the arithmetic of the op
// records batch_norm_train / batch_norm_train_grad (flowjob_ops.records.batch_norm_train), one launch each.
//
// x is seen as (outer, channels, inner) with the channel on the record's axis (NCHW: outer = N,
// inner = H * W; channels last or (batch, features): inner = 1). The block is 2-D: threadIdx.x picks
// one of blockDim.x channels (1 where inner > 1; up to 32 neighbouring channels where inner == 1, so
// that a warp reads 32 consecutive values), threadIdx.y strides over the channel's outer * inner
// values; blocks stride over groups of blockDim.x channels. blockDim.y must be a power of two and
// blockDim.x * blockDim.y at most 1024. Sums accumulate in double (for float32 too), each thread its
// own values, then a fixed tree over threadIdx.y: the result does not depend on timing.
//
// Forward: mean = sum(x) * inv_n, variance = sum((x - mean)^2) * inv_n (the two-pass variance, the
// centred value and its square rounded in x's type as the record does), then
// y = (x - mean) * gain [+ beta] [max(., 0)] with gain = T(gamma / sqrt(variance + epsilon)) computed in
// double; three passes over the channel's values, all in the one block.
// Backward: dy is first masked by y > 0 when the forward had the ReLU; sums of dy and dy * (x - mean)
// in double give dgamma = sum(dy * xhat), dbeta = sum(dy) and
// dx = (((x - mean) * along + dy) - mean(dy)) * gain, along = -sum(dy * (x - mean)) / sigma^2 * inv_n;
// two passes. Products feeding a sum are rounded on their own (__fmul_rn / __dmul_rn: no FMA), as numpy's
// separate ufuncs round them. Flags select gamma, beta and the ReLU; the pointers of absent ones are
// never read or written.
//
// Split channels (the *_split_* entry points): where a block per channel group leaves the device's
// multiprocessors idle (64 channels of 401408 values each), gridDim.y = splits blocks share a channel, each
// summing one slice of `per_slice` consecutive values of it (value v of a channel is (o, j) = (v / inner,
// v % inner)) into `partial[s * channels + c]` (double, a fixed tree within the block, as above); a later launch
// adds a channel's partials in slice order 0, 1, ..., so the result does not depend on timing either. The
// forward is three launches (sums; the centred squares, each block adding the sums' partials for the mean;
// the normalization, each block adding both), the backward two (the two sums; dx). The arithmetic is the
// one-block kernels', only the order of the float64 additions differs.

template <typename T> __device__ T mul_rn(T a, T b);
template <> __device__ float mul_rn<float>(float a, float b) { return __fmul_rn(a, b); }
template <> __device__ double mul_rn<double>(double a, double b) { return __dmul_rn(a, b); }

// numpy's maximum(v, 0): NaN stays, a tie (-0) gives the second operand (+0)
template <typename T> __device__ T relu_value(T v) { return (v > T(0) || v != v) ? v : T(0); }

// The sum over threadIdx.y of each column threadIdx.x: every thread gets its column's total.
__device__ double column_sum(double v, double* shared) {
    const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x;
    shared[ty * bx + tx] = v;
    __syncthreads();
    for (int s = blockDim.y >> 1; s > 0; s >>= 1) {
        if (ty < s) shared[ty * bx + tx] += shared[(ty + s) * bx + tx];
        __syncthreads();
    }
    const double total = shared[tx];
    __syncthreads();  // shared is reused by the next reduction
    return total;
}

// A thread's walk over one channel's values: (o, j) for o < outer, j < inner, from value `start` in steps of
// `stride` values, without a 64-bit division per value; at(c) is the value's index in x.
struct Walk {
    long long o, j;
    const long long step_o, step_j, channels, inner;
    __device__ Walk(long long start, long long stride, long long channels_, long long inner_)
        : o(start / inner_), j(start % inner_), step_o(stride / inner_), step_j(stride % inner_),
          channels(channels_), inner(inner_) {}
    __device__ __forceinline__ long long at(long long c) const { return (o * channels + c) * inner + j; }
    __device__ __forceinline__ void next() {
        o += step_o;
        j += step_j;
        if (j >= inner) {
            j -= inner;
            ++o;
        }
    }
};

template <typename T>
__device__ void batch_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* variance,
                                   long long outer, long long channels, long long inner, double inv_n,
                                   double epsilon, int with_scale, int with_offset, int relu) {
    __shared__ double shared[1024];
    const int ty = threadIdx.y, by = blockDim.y;
    for (long long first = (long long)blockIdx.x * blockDim.x; first < channels;
         first += (long long)gridDim.x * blockDim.x) {
        const long long c = first + threadIdx.x;
        const bool active = c < channels;
        double sum = 0.0;
        if (active)
            for (Walk v(ty, by, channels, inner); v.o < outer; v.next()) sum += (double)x[v.at(c)];
        const T m = (T)(column_sum(sum, shared) * inv_n);
        double squares = 0.0;
        if (active)
            for (Walk v(ty, by, channels, inner); v.o < outer; v.next()) {
                const T d = x[v.at(c)] - m;
                squares += (double)mul_rn(d, d);
            }
        const T var = (T)(column_sum(squares, shared) * inv_n);
        if (!active) continue;  // no barrier follows in this group, and only the last group has idle threads
        if (ty == 0) {
            mean[c] = m;
            variance[c] = var;
        }
        double scale = 1.0 / sqrt((double)var + epsilon);
        if (with_scale) scale = scale * (double)gamma[c];
        const T gain = (T)scale;
        const T shift = with_offset ? beta[c] : T(0);
        for (Walk v(ty, by, channels, inner); v.o < outer; v.next()) {
            const long long k = v.at(c);
            T out = mul_rn(T(x[k] - m), gain);
            if (with_offset) out = out + shift;
            if (relu) out = relu_value(out);
            y[k] = out;
        }
    }
}

template <typename T>
__device__ void batch_norm_backward(const T* x, const T* mean, const T* variance, const T* gamma, const T* y,
                                    const T* dy, T* dx, T* dgamma, T* dbeta, long long outer, long long channels,
                                    long long inner, double inv_n, double epsilon, int with_scale,
                                    int with_offset, int relu) {
    __shared__ double shared[1024];
    const int ty = threadIdx.y, by = blockDim.y;
    for (long long first = (long long)blockIdx.x * blockDim.x; first < channels;
         first += (long long)gridDim.x * blockDim.x) {
        const long long c = first + threadIdx.x;
        const bool active = c < channels;
        const T m = active ? mean[c] : T(0);
        double sum_dy = 0.0, sum_dy_centred = 0.0;
        if (active)
            for (Walk v(ty, by, channels, inner); v.o < outer; v.next()) {
                const long long k = v.at(c);
                T g = dy[k];
                if (relu) g = mul_rn(g, T(y[k] > T(0)));  // dy * (y > 0), as numpy multiplies by the mask
                sum_dy += (double)g;
                sum_dy_centred += (double)mul_rn(g, T(x[k] - m));
            }
        sum_dy = column_sum(sum_dy, shared);
        sum_dy_centred = column_sum(sum_dy_centred, shared);
        if (!active) continue;  // as in the forward
        const double inv_sigma = 1.0 / sqrt((double)variance[c] + epsilon);
        if (ty == 0) {
            if (with_scale) dgamma[c] = (T)(sum_dy_centred * inv_sigma);
            if (with_offset) dbeta[c] = (T)sum_dy;
        }
        const T gain = (T)(with_scale ? inv_sigma * (double)gamma[c] : inv_sigma);
        const T along = (T)(-inv_sigma * inv_sigma * sum_dy_centred * inv_n);
        const T mean_dy = (T)(sum_dy * inv_n);
        for (Walk v(ty, by, channels, inner); v.o < outer; v.next()) {
            const long long k = v.at(c);
            T g = dy[k];
            if (relu) g = mul_rn(g, T(y[k] > T(0)));
            dx[k] = mul_rn(T((mul_rn(T(x[k] - m), along) + g) - mean_dy), gain);
        }
    }
}

// The sum of a channel's partials, slice 0 first.
__device__ __forceinline__ double slices_total(const double* partial, int splits, long long channels, long long c) {
    double total = 0.0;
    for (int s = 0; s < splits; ++s) total += partial[(long long)s * channels + c];
    return total;
}

// The block's slice of a channel's values: [begin, end), begin = blockIdx.y * per_slice.
struct Slice {
    long long begin, end;
    __device__ Slice(long long outer, long long inner, long long per_slice) {
        const long long n = outer * inner;
        begin = (long long)blockIdx.y * per_slice;
        end = begin + per_slice < n ? begin + per_slice : n;
    }
};

// pass 1 of the forward (sums of x, moments = 0) and of the mean's centred squares (moments = 1)
template <typename T>
__device__ void batch_norm_split_moment(const T* x, double* partial, const double* sums, long long outer,
                                        long long channels, long long inner, long long per_slice, double inv_n,
                                        int moment) {
    __shared__ double shared[1024];
    const int ty = threadIdx.y, by = blockDim.y, splits = gridDim.y;
    const Slice slice(outer, inner, per_slice);
    for (long long first = (long long)blockIdx.x * blockDim.x; first < channels;
         first += (long long)gridDim.x * blockDim.x) {
        const long long c = first + threadIdx.x;
        const bool active = c < channels;
        double sum = 0.0;
        if (active) {
            const T m = moment ? (T)(slices_total(sums, splits, channels, c) * inv_n) : T(0);
            Walk w(slice.begin + ty, by, channels, inner);
            for (long long v = slice.begin + ty; v < slice.end; v += by, w.next()) {
                if (moment) {
                    const T d = x[w.at(c)] - m;
                    sum += (double)mul_rn(d, d);
                } else {
                    sum += (double)x[w.at(c)];
                }
            }
        }
        const double total = column_sum(sum, shared);
        if (active && ty == 0) partial[(long long)blockIdx.y * channels + c] = total;
    }
}

template <typename T>
__device__ void batch_norm_split_normalize(const T* x, const T* gamma, const T* beta, T* y, T* mean, T* variance,
                                           const double* sums, const double* squares, long long outer,
                                           long long channels, long long inner, long long per_slice,
                                           double inv_n, double epsilon, int with_scale, int with_offset,
                                           int relu) {
    const int ty = threadIdx.y, by = blockDim.y, splits = gridDim.y;
    const Slice slice(outer, inner, per_slice);
    for (long long first = (long long)blockIdx.x * blockDim.x; first < channels;
         first += (long long)gridDim.x * blockDim.x) {
        const long long c = first + threadIdx.x;
        if (c >= channels) continue;  // no barrier in this kernel
        const T m = (T)(slices_total(sums, splits, channels, c) * inv_n);
        const T var = (T)(slices_total(squares, splits, channels, c) * inv_n);
        if (blockIdx.y == 0 && ty == 0) {
            mean[c] = m;
            variance[c] = var;
        }
        double scale = 1.0 / sqrt((double)var + epsilon);
        if (with_scale) scale = scale * (double)gamma[c];
        const T gain = (T)scale;
        const T shift = with_offset ? beta[c] : T(0);
        Walk w(slice.begin + ty, by, channels, inner);
        for (long long v = slice.begin + ty; v < slice.end; v += by, w.next()) {
            const long long k = w.at(c);
            T out = mul_rn(T(x[k] - m), gain);
            if (with_offset) out = out + shift;
            if (relu) out = relu_value(out);
            y[k] = out;
        }
    }
}

// the backward's sums: partial[s * channels + c] of dy, partial[(splits + s) * channels + c] of dy * (x - mean)
template <typename T>
__device__ void batch_norm_split_grad_sums(const T* x, const T* mean, const T* y, const T* dy, double* partial,
                                           long long outer, long long channels, long long inner,
                                           long long per_slice, int relu) {
    __shared__ double shared[1024];
    const int ty = threadIdx.y, by = blockDim.y, splits = gridDim.y;
    const Slice slice(outer, inner, per_slice);
    for (long long first = (long long)blockIdx.x * blockDim.x; first < channels;
         first += (long long)gridDim.x * blockDim.x) {
        const long long c = first + threadIdx.x;
        const bool active = c < channels;
        double sum_dy = 0.0, sum_dy_centred = 0.0;
        if (active) {
            const T m = mean[c];
            Walk w(slice.begin + ty, by, channels, inner);
            for (long long v = slice.begin + ty; v < slice.end; v += by, w.next()) {
                const long long k = w.at(c);
                T g = dy[k];
                if (relu) g = mul_rn(g, T(y[k] > T(0)));
                sum_dy += (double)g;
                sum_dy_centred += (double)mul_rn(g, T(x[k] - m));
            }
        }
        sum_dy = column_sum(sum_dy, shared);
        sum_dy_centred = column_sum(sum_dy_centred, shared);
        if (active && ty == 0) {
            partial[(long long)blockIdx.y * channels + c] = sum_dy;
            partial[((long long)splits + blockIdx.y) * channels + c] = sum_dy_centred;
        }
    }
}

template <typename T>
__device__ void batch_norm_split_grad_apply(const T* x, const T* mean, const T* variance, const T* gamma,
                                            const T* y, const T* dy, T* dx, T* dgamma, T* dbeta,
                                            const double* partial, long long outer, long long channels,
                                            long long inner, long long per_slice, double inv_n, double epsilon,
                                            int with_scale, int with_offset, int relu) {
    const int ty = threadIdx.y, by = blockDim.y, splits = gridDim.y;
    const Slice slice(outer, inner, per_slice);
    for (long long first = (long long)blockIdx.x * blockDim.x; first < channels;
         first += (long long)gridDim.x * blockDim.x) {
        const long long c = first + threadIdx.x;
        if (c >= channels) continue;  // no barrier in this kernel
        const double sum_dy = slices_total(partial, splits, channels, c);
        const double sum_dy_centred = slices_total(partial + (long long)splits * channels, splits, channels, c);
        const T m = mean[c];
        const double inv_sigma = 1.0 / sqrt((double)variance[c] + epsilon);
        if (blockIdx.y == 0 && ty == 0) {
            if (with_scale) dgamma[c] = (T)(sum_dy_centred * inv_sigma);
            if (with_offset) dbeta[c] = (T)sum_dy;
        }
        const T gain = (T)(with_scale ? inv_sigma * (double)gamma[c] : inv_sigma);
        const T along = (T)(-inv_sigma * inv_sigma * sum_dy_centred * inv_n);
        const T mean_dy = (T)(sum_dy * inv_n);
        Walk w(slice.begin + ty, by, channels, inner);
        for (long long v = slice.begin + ty; v < slice.end; v += by, w.next()) {
            const long long k = w.at(c);
            T g = dy[k];
            if (relu) g = mul_rn(g, T(y[k] > T(0)));
            dx[k] = mul_rn(T((mul_rn(T(x[k] - m), along) + g) - mean_dy), gain);
        }
    }
}

extern "C" __global__ void batch_norm_forward_f32(const float* x, const float* gamma, const float* beta, float* y,
                                                  float* mean, float* variance, long long outer,
                                                  long long channels, long long inner, double inv_n,
                                                  double epsilon, int with_scale, int with_offset, int relu) {
    batch_norm_forward(x, gamma, beta, y, mean, variance, outer, channels, inner, inv_n, epsilon, with_scale,
                       with_offset, relu);
}

extern "C" __global__ void batch_norm_forward_f64(const double* x, const double* gamma, const double* beta,
                                                  double* y, double* mean, double* variance, long long outer,
                                                  long long channels, long long inner, double inv_n,
                                                  double epsilon, int with_scale, int with_offset, int relu) {
    batch_norm_forward(x, gamma, beta, y, mean, variance, outer, channels, inner, inv_n, epsilon, with_scale,
                       with_offset, relu);
}

extern "C" __global__ void batch_norm_backward_f32(const float* x, const float* mean, const float* variance,
                                                   const float* gamma, const float* y, const float* dy, float* dx,
                                                   float* dgamma, float* dbeta, long long outer,
                                                   long long channels, long long inner, double inv_n,
                                                   double epsilon, int with_scale, int with_offset, int relu) {
    batch_norm_backward(x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, outer, channels, inner, inv_n,
                        epsilon, with_scale, with_offset, relu);
}

extern "C" __global__ void batch_norm_backward_f64(const double* x, const double* mean, const double* variance,
                                                   const double* gamma, const double* y, const double* dy,
                                                   double* dx, double* dgamma, double* dbeta, long long outer,
                                                   long long channels, long long inner, double inv_n,
                                                   double epsilon, int with_scale, int with_offset, int relu) {
    batch_norm_backward(x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, outer, channels, inner, inv_n,
                        epsilon, with_scale, with_offset, relu);
}

extern "C" __global__ void batch_norm_split_moment_f32(const float* x, double* partial, const double* sums,
                                                      long long outer, long long channels, long long inner,
                                                      long long per_slice, double inv_n, int moment) {
    batch_norm_split_moment(x, partial, sums, outer, channels, inner, per_slice, inv_n, moment);
}

extern "C" __global__ void batch_norm_split_normalize_f32(const float* x, const float* gamma, const float* beta, float* y,
                                                         float* mean, float* variance, const double* sums,
                                                         const double* squares, long long outer,
                                                         long long channels, long long inner, long long per_slice,
                                                         double inv_n, double epsilon, int with_scale,
                                                         int with_offset, int relu) {
    batch_norm_split_normalize(x, gamma, beta, y, mean, variance, sums, squares, outer, channels, inner, per_slice,
                               inv_n, epsilon, with_scale, with_offset, relu);
}

extern "C" __global__ void batch_norm_split_grad_sums_f32(const float* x, const float* mean, const float* y,
                                                         const float* dy, double* partial, long long outer,
                                                         long long channels, long long inner, long long per_slice,
                                                         int relu) {
    batch_norm_split_grad_sums(x, mean, y, dy, partial, outer, channels, inner, per_slice, relu);
}

extern "C" __global__ void batch_norm_split_grad_apply_f32(const float* x, const float* mean, const float* variance,
                                                          const float* gamma, const float* y, const float* dy, float* dx,
                                                          float* dgamma, float* dbeta, const double* partial,
                                                          long long outer, long long channels, long long inner,
                                                          long long per_slice, double inv_n, double epsilon,
                                                          int with_scale, int with_offset, int relu) {
    batch_norm_split_grad_apply(x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, partial, outer, channels, inner,
                                per_slice, inv_n, epsilon, with_scale, with_offset, relu);
}

extern "C" __global__ void batch_norm_split_moment_f64(const double* x, double* partial, const double* sums,
                                                      long long outer, long long channels, long long inner,
                                                      long long per_slice, double inv_n, int moment) {
    batch_norm_split_moment(x, partial, sums, outer, channels, inner, per_slice, inv_n, moment);
}

extern "C" __global__ void batch_norm_split_normalize_f64(const double* x, const double* gamma, const double* beta, double* y,
                                                         double* mean, double* variance, const double* sums,
                                                         const double* squares, long long outer,
                                                         long long channels, long long inner, long long per_slice,
                                                         double inv_n, double epsilon, int with_scale,
                                                         int with_offset, int relu) {
    batch_norm_split_normalize(x, gamma, beta, y, mean, variance, sums, squares, outer, channels, inner, per_slice,
                               inv_n, epsilon, with_scale, with_offset, relu);
}

extern "C" __global__ void batch_norm_split_grad_sums_f64(const double* x, const double* mean, const double* y,
                                                         const double* dy, double* partial, long long outer,
                                                         long long channels, long long inner, long long per_slice,
                                                         int relu) {
    batch_norm_split_grad_sums(x, mean, y, dy, partial, outer, channels, inner, per_slice, relu);
}

extern "C" __global__ void batch_norm_split_grad_apply_f64(const double* x, const double* mean, const double* variance,
                                                          const double* gamma, const double* y, const double* dy, double* dx,
                                                          double* dgamma, double* dbeta, const double* partial,
                                                          long long outer, long long channels, long long inner,
                                                          long long per_slice, double inv_n, double epsilon,
                                                          int with_scale, int with_offset, int relu) {
    batch_norm_split_grad_apply(x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, partial, outer, channels, inner,
                                per_slice, inv_n, epsilon, with_scale, with_offset, relu);
}
