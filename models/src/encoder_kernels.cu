// Fused kernels of ctxd's BERT encoder on CUDA (models/src/encoder_kernels.rs launches them;
// models/build.rs compiles this file to PTX with nvcc when the `cuda` feature is on).
// Each kernel reads and writes f16 or f32 and computes in f32; each replaces two or three of
// candle's generic kernels (a bias add over rows, a copy, an activation, a layer norm) with one
// pass over memory. Names end in _f16 / _f32; arguments: inputs, then the output, then sizes.

#include <cuda_fp16.h>

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half(x); }

// 32-bit indices (the launcher keeps every tensor under 2^32 elements): 64-bit division and
// modulo cost the element-wise kernels most of their time.
#define GRID_STRIDE(i, n) \
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// N elements moved as one access (16 bytes when N = 16 / sizeof(T)); N = 1 where the sizes or
// the pointers do not allow it.
template <typename T, int N> struct __align__(sizeof(T) * N) Pack { T e[N]; };
template <typename T, int N> __device__ __forceinline__ Pack<T, N> load(const T *p) {
    return *reinterpret_cast<const Pack<T, N> *>(p);
}
template <typename T, int N> __device__ __forceinline__ void store(T *p, const Pack<T, N> &v) {
    *reinterpret_cast<Pack<T, N> *>(p) = v;
}
__device__ __forceinline__ bool aligned16(const void *p) { return ((size_t)p & 15) == 0; }

// qkv: (batch·len, 3·hidden) GEMM output without bias; out: (3, batch, heads, len, head_dim),
// the bias added. Read in source order (coalesced), N consecutive elements of one head at a time.
template <typename T, int N>
__device__ void qkv_heads_n(const T *qkv, const T *bias, T *out, int batch, int len, int heads, int hd) {
    const unsigned int hidden = heads * hd, width = 3 * hidden, total = (unsigned int)batch * len * width;
    GRID_STRIDE(p, total / N) {
        const unsigned int i = p * N, col = i % width, row = i / width;
        const unsigned int which = col / hidden, h = (col % hidden) / hd, d = col % hd;
        const unsigned int b = row / len, s = row % len;
        const unsigned int dst = (((which * batch + b) * heads + h) * len + s) * hd + d;
        Pack<T, N> v = load<T, N>(qkv + i);
        const Pack<T, N> w = load<T, N>(bias + col);
#pragma unroll
        for (int t = 0; t < N; t++) v.e[t] = from_f<T>(to_f(v.e[t]) + to_f(w.e[t]));
        store<T, N>(out + dst, v);
    }
}
template <typename T>
__device__ void qkv_heads(const T *qkv, const T *bias, T *out, int batch, int len, int heads, int hd) {
    constexpr int N = 16 / sizeof(T);
    if (hd % N == 0 && aligned16(qkv) && aligned16(bias) && aligned16(out))
        qkv_heads_n<T, N>(qkv, bias, out, batch, len, heads, hd);
    else
        qkv_heads_n<T, 1>(qkv, bias, out, batch, len, heads, hd);
}

// ctx: (batch, heads, len, head_dim); out: (batch·len, hidden). Written in order.
template <typename T, int N>
__device__ void heads_to_tokens_n(const T *ctx, T *out, int batch, int len, int heads, int hd) {
    const unsigned int hidden = heads * hd, total = (unsigned int)batch * len * hidden;
    GRID_STRIDE(p, total / N) {
        const unsigned int i = p * N, col = i % hidden, row = i / hidden;
        const unsigned int b = row / len, s = row % len, h = col / hd, d = col % hd;
        store<T, N>(out + i, load<T, N>(ctx + ((b * heads + h) * len + s) * hd + d));
    }
}
template <typename T>
__device__ void heads_to_tokens(const T *ctx, T *out, int batch, int len, int heads, int hd) {
    constexpr int N = 16 / sizeof(T);
    if (hd % N == 0 && aligned16(ctx) && aligned16(out))
        heads_to_tokens_n<T, N>(ctx, out, batch, len, heads, hd);
    else
        heads_to_tokens_n<T, 1>(ctx, out, batch, len, heads, hd);
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// Softmax over each row of x (rows, cols), one warp per row; row r belongs to sequence
// r / rows_per_seq, whose first lens[seq] columns are real tokens: the rest get probability 0
// (no additive bias: nothing to overflow in f16). lens holds the lengths as T. Rows of up to
// 512 columns in multiples of N are held in registers and moved 16 bytes at a time; others
// are read three times.
template <typename T, int N>
__device__ void softmax_row_packed(const T *xr, T *yr, int cols, int valid, int lane) {
    constexpr int CHUNKS = 512 / (32 * N);
    float v[CHUNKS][N];
    float m = -INFINITY;
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
        const int j0 = (lane + 32 * c) * N;
        Pack<T, N> p;
        if (j0 < cols) p = load<T, N>(xr + j0);
#pragma unroll
        for (int t = 0; t < N; t++) {
            v[c][t] = (j0 < cols && j0 + t < valid) ? to_f(p.e[t]) : -INFINITY;
            m = fmaxf(m, v[c][t]);
        }
    }
    m = warp_max(m);
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < CHUNKS; c++)
#pragma unroll
        for (int t = 0; t < N; t++) {
            v[c][t] = v[c][t] == -INFINITY ? 0.f : __expf(v[c][t] - m);
            sum += v[c][t];
        }
    const float inv = 1.f / warp_sum(sum);
#pragma unroll
    for (int c = 0; c < CHUNKS; c++) {
        const int j0 = (lane + 32 * c) * N;
        if (j0 >= cols) continue;
        Pack<T, N> p;
#pragma unroll
        for (int t = 0; t < N; t++) p.e[t] = from_f<T>(v[c][t] * inv);
        store<T, N>(yr + j0, p);
    }
}
template <typename T>
__device__ void softmax_row(const T *xr, T *yr, int cols, int valid, int lane) {
    float m = -INFINITY;
    for (int j = lane; j < valid; j += 32) m = fmaxf(m, to_f(xr[j]));
    m = warp_max(m);
    float sum = 0.f;
    for (int j = lane; j < valid; j += 32) sum += __expf(to_f(xr[j]) - m);
    const float inv = 1.f / warp_sum(sum);
    for (int j = lane; j < cols; j += 32) yr[j] = from_f<T>(j < valid ? __expf(to_f(xr[j]) - m) * inv : 0.f);
}
template <typename T>
__device__ void masked_softmax(const T *x, const T *lens, T *out, int rows, int cols, int rows_per_seq) {
    constexpr int N = 16 / sizeof(T);
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const int valid = min(cols, (int)to_f(lens[warp / rows_per_seq]));
    const T *xr = x + (size_t)warp * cols;
    T *yr = out + (size_t)warp * cols;
    if (cols <= 512 && cols % N == 0 && aligned16(x) && aligned16(out))
        softmax_row_packed<T, N>(xr, yr, cols, valid, lane);
    else
        softmax_row<T>(xr, yr, cols, valid, lane);
}

__device__ float block_sum(float v, float *scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.f;
    return warp_sum(v);
}

// out = LayerNorm(a + bias + res) · gamma + beta over each row of cols; one block per row.
// res row r is row r % res_rows (res_rows = rows for a residual; = len for position embeddings).
// Dynamic shared memory: cols floats (the row) + 32 (the reduction).
template <typename T>
__device__ void bias_residual_norm(const T *a, const T *bias, const T *res, const T *gamma, const T *beta, T *out,
                                   int cols, int res_rows, float eps) {
    extern __shared__ float smem[];
    float *row = smem, *scratch = smem + cols;
    const size_t base = (size_t)blockIdx.x * cols, rbase = (size_t)(blockIdx.x % res_rows) * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        const float v = to_f(a[base + j]) + to_f(bias[j]) + to_f(res[rbase + j]);
        row[j] = v;
        s += v;
    }
    const float mean = block_sum(s, scratch) / cols;
    float q = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        const float d = row[j] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, scratch) / cols + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        out[base + j] = from_f<T>((row[j] - mean) * rstd * to_f(gamma[j]) + to_f(beta[j]));
}

__device__ __forceinline__ float activate(float v, int act) {
    if (act == 0) return 0.5f * v * (1.f + erff(v * 0.7071067811865476f));
    if (act == 1) return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    return fmaxf(v, 0.f);
}

// out = act(a + bias) over (rows, cols): act 0 = erf GELU, 1 = tanh GELU, 2 = ReLU.
template <typename T, int N>
__device__ void bias_act_n(const T *a, const T *bias, T *out, int rows, int cols, int act) {
    const unsigned int total = (unsigned int)rows * cols;
    GRID_STRIDE(p, total / N) {
        const unsigned int i = p * N;
        Pack<T, N> v = load<T, N>(a + i);
        const Pack<T, N> w = load<T, N>(bias + i % (unsigned int)cols);
#pragma unroll
        for (int t = 0; t < N; t++) v.e[t] = from_f<T>(activate(to_f(v.e[t]) + to_f(w.e[t]), act));
        store<T, N>(out + i, v);
    }
}
template <typename T>
__device__ void bias_act(const T *a, const T *bias, T *out, int rows, int cols, int act) {
    constexpr int N = 16 / sizeof(T);
    if (cols % N == 0 && aligned16(a) && aligned16(bias) && aligned16(out))
        bias_act_n<T, N>(a, bias, out, rows, cols, act);
    else
        bias_act_n<T, 1>(a, bias, out, rows, cols, act);
}

#define INSTANTIATE(T, S)                                                                                      \
    extern "C" __global__ void qkv_heads_##S(const T *qkv, const T *bias, T *out, int batch, int len,          \
                                             int heads, int hd) {                                              \
        qkv_heads<T>(qkv, bias, out, batch, len, heads, hd);                                                   \
    }                                                                                                          \
    extern "C" __global__ void heads_to_tokens_##S(const T *ctx, T *out, int batch, int len, int heads,        \
                                                   int hd) {                                                   \
        heads_to_tokens<T>(ctx, out, batch, len, heads, hd);                                                   \
    }                                                                                                          \
    extern "C" __global__ void masked_softmax_##S(const T *x, const T *lens, T *out, int rows, int cols,       \
                                                  int rows_per_seq) {                                          \
        masked_softmax<T>(x, lens, out, rows, cols, rows_per_seq);                                             \
    }                                                                                                          \
    extern "C" __global__ void bias_residual_norm_##S(const T *a, const T *bias, const T *res, const T *gamma, \
                                                      const T *beta, T *out, int cols, int res_rows,           \
                                                      float eps) {                                             \
        bias_residual_norm<T>(a, bias, res, gamma, beta, out, cols, res_rows, eps);                            \
    }                                                                                                          \
    extern "C" __global__ void bias_act_##S(const T *a, const T *bias, T *out, int rows, int cols, int act) {  \
        bias_act<T>(a, bias, out, rows, cols, act);                                                            \
    }

INSTANTIATE(__half, f16)
INSTANTIATE(float, f32)
