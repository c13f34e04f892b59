// 2-D max pooling, forward and backward, for the gpu backend: the semantics of the op records max_pool2d,
// max_pool2d_grad and max_pool2d_relu_grad (flowjob_ops.records.pool, reference kernels
// flowjob_ops.kernels.pool), NCHW (channels_last = 0) or NHWC (channels_last = 1), any strides and pads.
//
// A window's taps run in row-major order; a tap outside the input (padding) reads -infinity.
// Forward: one thread per output element (a grid-stride loop). y = numpy's maximum folded over the taps
// (a NaN wins; of equal values the later one's bits, so -0 / +0 come out as numpy's), then, when
// `save` is set, the window's first tap whose value equals y is written to argmax as the tap number
// th * kw + tw, -1 where none does (y is NaN): the tap the gradient goes to. A padding tap can be that
// tap (a window whose real values are all -inf), and then no input element gets the window's gradient,
// as in the reference.
// Backward: one thread per input element (a grid-stride loop), a gather, so no atomics and a fixed
// order: over the taps that cover the element, in row-major order, g = dy[window] (times T(y > 0)
// with `relu`) times T(hit) is added to a zero (or, with `overwrite`, for windows that never overlap,
// stored: numpy's dx = dy * hit there). hit: argmax[window] is this tap (`saved`), else x == y[window]
// and no earlier tap of the window equals y[window] (the first maximum, found from x and y alone).
// Multiplying by the 0 / 1 hit, not skipping, gives numpy's NaN for a dy of inf or NaN in every tap.

template <typename T> __device__ T minus_infinity();
// from its bits: NVRTC (CuPy's compiler) includes no math.h, so there is no INFINITY macro
template <> __device__ float minus_infinity<float>() { return __int_as_float(0xff800000); }
template <> __device__ double minus_infinity<double>() { return __longlong_as_double(0xfff0000000000000LL); }

// numpy's maximum: a NaN operand wins (the first of two), of equal values the second
template <typename T> __device__ T numpy_max(T a, T b) { return (a > b || a != a) ? a : b; }

// The layout of one (n, c) plane: element (h, w) of it is base + h * row + w * col.
struct Plane {
    long long base, row, col;
};

__device__ __forceinline__ Plane plane_of(long long n, long long c, long long channels, long long height,
                                          long long width, int channels_last) {
    if (channels_last) return Plane{n * height * width * channels + c, width * channels, channels};
    return Plane{(n * channels + c) * height * width, width, 1};
}

// Output element `o` as (n, c, oh, ow) in the layout.
__device__ __forceinline__ void split(long long o, long long channels, long long oh_size, long long ow_size,
                                      int channels_last, long long& n, long long& c, long long& oh,
                                      long long& ow) {
    if (channels_last) {
        c = o % channels;
        o /= channels;
        ow = o % ow_size;
        o /= ow_size;
        oh = o % oh_size;
        n = o / oh_size;
    } else {
        ow = o % ow_size;
        o /= ow_size;
        oh = o % oh_size;
        o /= oh_size;
        c = o % channels;
        n = o / channels;
    }
}

__device__ __forceinline__ long long output_index(long long n, long long c, long long oh, long long ow,
                                                  long long channels, long long oh_size, long long ow_size,
                                                  int channels_last) {
    return channels_last ? ((n * oh_size + oh) * ow_size + ow) * channels + c
                         : ((n * channels + c) * oh_size + oh) * ow_size + ow;
}

template <typename T>
__device__ __forceinline__ T tap_value(const T* x, Plane p, long long h, long long w, long long height,
                                       long long width) {
    return (h >= 0 && h < height && w >= 0 && w < width) ? x[p.base + h * p.row + w * p.col] : minus_infinity<T>();
}

// The first tap before `limit` of window (oh, ow) whose value equals target; -1 where none does.
template <typename T>
__device__ int first_hit(const T* x, Plane p, long long oh, long long ow, long long height, long long width,
                         int kw, int stride_h, int stride_w, int pad_h, int pad_w, T target, int limit) {
    const long long h0 = oh * stride_h - pad_h, w0 = ow * stride_w - pad_w;
    for (int t = 0; t < limit; ++t) {
        const int th = t / kw, tw = t - th * kw;
        if (tap_value(x, p, h0 + th, w0 + tw, height, width) == target) return t;
    }
    return -1;
}

template <typename T>
__device__ void max_pool2d_forward(const T* x, T* y, int* argmax, int save, long long batch, long long channels,
                                   long long height, long long width, long long oh_size, long long ow_size,
                                   int kh, int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                                   int channels_last) {
    const long long total = batch * channels * oh_size * ow_size;
    for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < total;
         o += (long long)blockDim.x * gridDim.x) {
        long long n, c, oh, ow;
        split(o, channels, oh_size, ow_size, channels_last, n, c, oh, ow);
        const Plane p = plane_of(n, c, channels, height, width, channels_last);
        const long long h0 = oh * stride_h - pad_h, w0 = ow * stride_w - pad_w;
        T best = tap_value(x, p, h0, w0, height, width);
        for (int t = 1; t < kh * kw; ++t) {
            const int th = t / kw, tw = t - th * kw;
            best = numpy_max(best, tap_value(x, p, h0 + th, w0 + tw, height, width));
        }
        y[o] = best;
        if (save)
            argmax[o] = first_hit(x, p, oh, ow, height, width, kw, stride_h, stride_w, pad_h, pad_w, best, kh * kw);
    }
}

template <typename T>
__device__ void max_pool2d_backward(const T* x, const T* y, const T* dy, const int* argmax, T* dx, int saved,
                                    int relu, int overwrite, long long batch, long long channels, long long height,
                                    long long width, long long oh_size, long long ow_size, int kh, int kw,
                                    int stride_h, int stride_w, int pad_h, int pad_w, int channels_last) {
    const long long total = batch * channels * height * width;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)blockDim.x * gridDim.x) {
        long long n, c, h, w;
        split(i, channels, height, width, channels_last, n, c, h, w);
        const Plane p = plane_of(n, c, channels, height, width, channels_last);
        const T value = saved ? T(0) : x[i];
        T acc = T(0);
        // tap (th, tw) of window (oh, ow) reads padded row oh * stride_h + th = h + pad_h
        for (int th = 0; th < kh; ++th) {
            const long long hh = h + pad_h - th;
            if (hh < 0) break;
            if (hh % stride_h != 0) continue;
            const long long oh = hh / stride_h;
            if (oh >= oh_size) continue;
            for (int tw = 0; tw < kw; ++tw) {
                const long long ww = w + pad_w - tw;
                if (ww < 0) break;
                if (ww % stride_w != 0) continue;
                const long long ow = ww / stride_w;
                if (ow >= ow_size) continue;
                const long long o = output_index(n, c, oh, ow, channels, oh_size, ow_size, channels_last);
                const int t = th * kw + tw;
                bool hit;
                if (saved) {
                    hit = argmax[o] == t;
                } else {
                    const T target = y[o];
                    hit = value == target &&
                          first_hit(x, p, oh, ow, height, width, kw, stride_h, stride_w, pad_h, pad_w, target, t) < 0;
                }
                T g = dy[o];
                if (relu) g = g * T(y[o] > T(0));
                const T share = g * T(hit);
                acc = overwrite ? share : acc + share;
            }
        }
        dx[i] = acc;
    }
}

extern "C" __global__ void max_pool2d_forward_f32(const float* x, float* y, int* argmax, int save, long long batch,
                                                  long long channels, long long height, long long width,
                                                  long long oh_size, long long ow_size, int kh, int kw,
                                                  int stride_h, int stride_w, int pad_h, int pad_w,
                                                  int channels_last) {
    max_pool2d_forward(x, y, argmax, save, batch, channels, height, width, oh_size, ow_size, kh, kw, stride_h,
                       stride_w, pad_h, pad_w, channels_last);
}

extern "C" __global__ void max_pool2d_forward_f64(const double* x, double* y, int* argmax, int save,
                                                  long long batch, long long channels, long long height,
                                                  long long width, long long oh_size, long long ow_size, int kh,
                                                  int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                                                  int channels_last) {
    max_pool2d_forward(x, y, argmax, save, batch, channels, height, width, oh_size, ow_size, kh, kw, stride_h,
                       stride_w, pad_h, pad_w, channels_last);
}

extern "C" __global__ void max_pool2d_backward_f32(const float* x, const float* y, const float* dy,
                                                   const int* argmax, float* dx, int saved, int relu, int overwrite,
                                                   long long batch, long long channels, long long height,
                                                   long long width, long long oh_size, long long ow_size, int kh,
                                                   int kw, int stride_h, int stride_w, int pad_h, int pad_w,
                                                   int channels_last) {
    max_pool2d_backward(x, y, dy, argmax, dx, saved, relu, overwrite, batch, channels, height, width, oh_size,
                        ow_size, kh, kw, stride_h, stride_w, pad_h, pad_w, channels_last);
}

extern "C" __global__ void max_pool2d_backward_f64(const double* x, const double* y, const double* dy,
                                                   const int* argmax, double* dx, int saved, int relu,
                                                   int overwrite, long long batch, long long channels,
                                                   long long height, long long width, long long oh_size,
                                                   long long ow_size, int kh, int kw, int stride_h, int stride_w,
                                                   int pad_h, int pad_w, int channels_last) {
    max_pool2d_backward(x, y, dy, argmax, dx, saved, relu, overwrite, batch, channels, height, width, oh_size,
                        ow_size, kh, kw, stride_h, stride_w, pad_h, pad_w, channels_last);
}
