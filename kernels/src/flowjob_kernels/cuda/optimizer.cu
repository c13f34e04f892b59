// Fused optimizer updates for the gpu backend: flowjob-optim's update ops (flowjob_optim.update_ops), one
// grid-stride loop over the variable doing the whole update of each element: the gradient the rule uses,
// the slots, the weight decay and the variable, where the record's xp kernel makes one pass per operation.
//
// Arithmetic follows the records operation by operation, each rounded once: every step is an explicitly
// rounded intrinsic (__fmul_rn, __fadd_rn, ...), which the compiler never contracts into a fused
// multiply-add, so a float32 or float64 update rounds as numpy's does.
//
// g = grad * grad_scale * clip + l1 * sign(w) + l2 * w (flowjob_optim.update_ops._gradient_prep): the
// clipping factor is read only where `clipped` is set, the regularizer terms only where l1, l2 are not 0.
// The learning rate and the clipping factor are float32 arrays of shape (1,) read on the device, so a step
// needs no host read and can be captured in a CUDA graph.
//
// sgd:       rate = lr * lr_scale; w -= (g + wd * w) * rate      (g * rate without weight decay)
// momentum:  rate = lr * lr_scale; m = beta * m - g * rate; w = w + m - w * (rate * wd)
//            (lr_scale: a gradient scale folded into the rate, as the record does when nothing else
//            modifies the gradient; 1 otherwise)
// adam:      m = b1 m + (1 - b1) g; v = b2 v + ((1 - b2) g) g; w -= (m / (sqrt(v) + eps) + wd w) * rate,
//            rate = lr; with bias correction rate = lr sqrt(1 - b2_t) / (1 - b1_t) from the beta powers
//            b1_t, b2_t (arrays of shape (1,)) as they are before the step; adam_beta_powers then advances
//            them (b1_t *= b1, b2_t *= b2), launched after the update on the same stream.

template <typename T> struct Rounded;

template <> struct Rounded<float> {
    static __device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
    static __device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
    static __device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
    static __device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
    static __device__ __forceinline__ float root(float a) { return __fsqrt_rn(a); }
};

template <> struct Rounded<double> {
    static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
    static __device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
    static __device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
    static __device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }
    static __device__ __forceinline__ double root(double a) { return __dsqrt_rn(a); }
};

// numpy's sign: -1, +1, the zero itself for a zero, NaN for NaN
template <typename T> __device__ __forceinline__ T sign_of(T x) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

// the gradient the rule uses; `clip` is 1 when the node is not clipped (a product by 1 is exact)
template <typename T>
__device__ __forceinline__ T prepared(T w, T grad, T grad_scale, T clip, T l1, T l2) {
    typedef Rounded<T> R;
    T g = R::mul(R::mul(grad, grad_scale), clip);
    if (l1 != T(0)) g = R::add(g, R::mul(sign_of(w), l1));
    if (l2 != T(0)) g = R::add(g, R::mul(w, l2));
    return g;
}

template <typename T> __device__ __forceinline__ T clip_factor(const float* clip, int clipped) {
    return clipped ? T(clip[0]) : T(1);
}

#define GRID_STRIDE(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)blockDim.x * gridDim.x)

template <typename T>
__device__ void sgd(T* w, const T* grad, const float* lr, const float* clip, T lr_scale, T grad_scale, T l1, T l2,
                    T weight_decay, int clipped, long long n) {
    typedef Rounded<T> R;
    const T rate = R::mul(T(lr[0]), lr_scale);
    const T c = clip_factor<T>(clip, clipped);
    GRID_STRIDE(i, n) {
        const T wi = w[i];
        const T g = prepared(wi, grad[i], grad_scale, c, l1, l2);
        const T step = weight_decay != T(0) ? R::mul(R::add(g, R::mul(wi, weight_decay)), rate) : R::mul(g, rate);
        w[i] = R::sub(wi, step);
    }
}

template <typename T>
__device__ void momentum(T* w, T* m, const T* grad, const float* lr, const float* clip, T lr_scale, T grad_scale,
                         T l1, T l2, T beta, T weight_decay, int clipped, long long n) {
    typedef Rounded<T> R;
    const T rate = R::mul(T(lr[0]), lr_scale);
    const T decay_rate = R::mul(rate, weight_decay);
    const T c = clip_factor<T>(clip, clipped);
    GRID_STRIDE(i, n) {
        const T wi = w[i];
        const T g = prepared(wi, grad[i], grad_scale, c, l1, l2);
        const T mi = R::sub(R::mul(m[i], beta), R::mul(g, rate));
        m[i] = mi;
        T wn = R::add(wi, mi);
        if (weight_decay != T(0)) wn = R::sub(wn, R::mul(wi, decay_rate));
        w[i] = wn;
    }
}

template <typename T>
__device__ void adam(T* w, T* m, T* v, const T* grad, T rate, T c, T grad_scale, T l1, T l2, T beta1, T beta2,
                     T epsilon, T weight_decay, long long n) {
    typedef Rounded<T> R;
    const T one_minus_beta1 = R::sub(T(1), beta1), one_minus_beta2 = R::sub(T(1), beta2);
    GRID_STRIDE(i, n) {
        const T wi = w[i];
        const T g = prepared(wi, grad[i], grad_scale, c, l1, l2);
        const T mi = R::add(R::mul(m[i], beta1), R::mul(g, one_minus_beta1));
        const T vi = R::add(R::mul(v[i], beta2), R::mul(R::mul(g, one_minus_beta2), g));
        m[i] = mi;
        v[i] = vi;
        T u = R::div(mi, R::add(R::root(vi), epsilon));
        if (weight_decay != T(0)) u = R::add(u, R::mul(wi, weight_decay));
        w[i] = R::sub(wi, R::mul(u, rate));
    }
}

template <typename T>
__device__ T bias_corrected_rate(const float* lr, const T* beta1_t, const T* beta2_t) {
    typedef Rounded<T> R;
    return R::div(R::mul(T(lr[0]), R::root(R::sub(T(1), beta2_t[0]))), R::sub(T(1), beta1_t[0]));
}

template <typename T> __device__ void beta_powers(T* beta1_t, T* beta2_t, T beta1, T beta2) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        beta1_t[0] = Rounded<T>::mul(beta1_t[0], beta1);
        beta2_t[0] = Rounded<T>::mul(beta2_t[0], beta2);
    }
}

extern "C" __global__ void sgd_update_f32(float* w, const float* grad, const float* lr, const float* clip,
                                          float lr_scale, float grad_scale, float l1, float l2, float weight_decay,
                                          int clipped, long long n) {
    sgd(w, grad, lr, clip, lr_scale, grad_scale, l1, l2, weight_decay, clipped, n);
}

extern "C" __global__ void sgd_update_f64(double* w, const double* grad, const float* lr, const float* clip,
                                          double lr_scale, double grad_scale, double l1, double l2,
                                          double weight_decay, int clipped, long long n) {
    sgd(w, grad, lr, clip, lr_scale, grad_scale, l1, l2, weight_decay, clipped, n);
}

extern "C" __global__ void momentum_update_f32(float* w, float* m, const float* grad, const float* lr,
                                               const float* clip, float lr_scale, float grad_scale, float l1,
                                               float l2, float beta, float weight_decay, int clipped, long long n) {
    momentum(w, m, grad, lr, clip, lr_scale, grad_scale, l1, l2, beta, weight_decay, clipped, n);
}

extern "C" __global__ void momentum_update_f64(double* w, double* m, const double* grad, const float* lr,
                                               const float* clip, double lr_scale, double grad_scale, double l1,
                                               double l2, double beta, double weight_decay, int clipped,
                                               long long n) {
    momentum(w, m, grad, lr, clip, lr_scale, grad_scale, l1, l2, beta, weight_decay, clipped, n);
}

extern "C" __global__ void adam_update_f32(float* w, float* m, float* v, const float* grad, const float* lr,
                                           const float* clip, float grad_scale, float l1, float l2, float beta1,
                                           float beta2, float epsilon, float weight_decay, int clipped,
                                           long long n) {
    adam(w, m, v, grad, float(lr[0]), clip_factor<float>(clip, clipped), grad_scale, l1, l2, beta1, beta2, epsilon,
         weight_decay, n);
}

extern "C" __global__ void adam_update_f64(double* w, double* m, double* v, const double* grad, const float* lr,
                                           const float* clip, double grad_scale, double l1, double l2, double beta1,
                                           double beta2, double epsilon, double weight_decay, int clipped,
                                           long long n) {
    adam(w, m, v, grad, double(lr[0]), clip_factor<double>(clip, clipped), grad_scale, l1, l2, beta1, beta2,
         epsilon, weight_decay, n);
}

extern "C" __global__ void adam_bias_corrected_update_f32(float* w, float* m, float* v, const float* beta1_t,
                                                          const float* beta2_t, const float* grad, const float* lr,
                                                          const float* clip, float grad_scale, float l1, float l2,
                                                          float beta1, float beta2, float epsilon,
                                                          float weight_decay, int clipped, long long n) {
    adam(w, m, v, grad, bias_corrected_rate(lr, beta1_t, beta2_t), clip_factor<float>(clip, clipped), grad_scale,
         l1, l2, beta1, beta2, epsilon, weight_decay, n);
}

extern "C" __global__ void adam_bias_corrected_update_f64(double* w, double* m, double* v, const double* beta1_t,
                                                          const double* beta2_t, const double* grad,
                                                          const float* lr, const float* clip, double grad_scale,
                                                          double l1, double l2, double beta1, double beta2,
                                                          double epsilon, double weight_decay, int clipped,
                                                          long long n) {
    adam(w, m, v, grad, bias_corrected_rate(lr, beta1_t, beta2_t), clip_factor<double>(clip, clipped), grad_scale,
         l1, l2, beta1, beta2, epsilon, weight_decay, n);
}

// one thread: launch after the bias-corrected update, on its stream
extern "C" __global__ void adam_beta_powers_f32(float* beta1_t, float* beta2_t, float beta1, float beta2) {
    beta_powers(beta1_t, beta2_t, beta1, beta2);
}

extern "C" __global__ void adam_beta_powers_f64(double* beta1_t, double* beta2_t, double beta1, double beta2) {
    beta_powers(beta1_t, beta2_t, beta1, beta2);
}
