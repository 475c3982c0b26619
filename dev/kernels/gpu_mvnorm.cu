/* What does a decode product pay to take its input's RMSNorm itself? A decode step's norm is a
 * kernel of its own (~2.5 µs for 1,024 values on the H200, ~3.6 for 4,096: the step's path), and
 * every fused form tried kept the norm's reduction ahead of the product's dots. Here the product
 * quantizes u = x ⊙ w_norm straight from the residual row (h = u / rms(x), so h's codes are u's
 * with the scales divided by rms(x): no sum is needed before quantizing) and multiplies each row's
 * sum by 1 / rms(x) at the end, the block's sum of squares taken after the dots:
 *   regs       k_mmvq's one-token loop reading x already normalized and quantized (the norm
 *              kernel's output), its first round loaded before x is staged;
 *   regs+norm  the same loop staging x from the residual row and the norm's weight;
 *   regs+exact the norm's order kept: the block's sum of squares first, then h quantized — the
 *              norm kernel's values bit for bit, so a one-token step and a batch's agree (the
 *              batcher's solo-against-batched test needs that), at the cost of a reduction
 *              between the wait and the first dot.
 * The differences are what the norm costs inside the product, against the kernel it would remove.
 * Activations at the engine's two levels (its default) and at one (CELER_GPU_MVQ_X8=1). Q4_0,
 * the 8B's and the 0.6B's products after a norm (q/k/v, gate or up), rotating over copies worth 8
 * times the L2, plain launches; each output against a double-precision product of the
 * same codes (the norm's in double).
 *
 * Standalone (no engine code): nvcc -O3 -arch=sm_90 dev/kernels/gpu_mvnorm.cu -o mvnorm && ./mvnorm */
#include "mvq4.cuh"

enum { REPS = 50 };

/* One shape, L levels: both variants timed and checked. */
template <int L> static void run(shape s, int copies, const uint8_t *dw, const float *x, const float *nw, float eps)
{
    const int64_t bytes = s.rows * s.row_b, nb = s.cols / 32;
    float        *v = (float *)malloc(s.cols * sizeof(float));
    int8_t       *hq = (int8_t *)malloc(L * s.cols), *uq = (int8_t *)malloc(L * s.cols);
    float2       *hd = (float2 *)malloc(nb * sizeof(float2)), *ud = (float2 *)malloc(nb * sizeof(float2));
    uint8_t      *hw = (uint8_t *)malloc(bytes);
    CHECK(cudaMemcpy(hw, dw, bytes, cudaMemcpyDeviceToHost));
    double ss = 0;
    for (int64_t i = 0; i < s.cols; i++) ss += (double)x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / (double)s.cols + eps);
    for (int64_t i = 0; i < s.cols; i++) v[i] = (float)((double)x[i] * inv) * nw[i]; /* h, as a norm kernel */
    quant_x(v, s.cols, L, hq, hd);
    for (int64_t i = 0; i < s.cols; i++) v[i] = x[i] * nw[i]; /* u */
    quant_x(v, s.cols, L, uq, ud);
    double *ref_h = (double *)malloc(s.rows * sizeof(double)), *ref_u = (double *)malloc(s.rows * sizeof(double));
    reference(hw, s, L, hq, hd, ref_h);
    reference(hw, s, L, uq, ud, ref_u);
    for (int64_t r = 0; r < s.rows; r++) ref_u[r] *= inv;
    int8_t *dq;
    float2 *dd;
    float  *dx, *dn, *dy;
    CHECK(cudaMalloc(&dq, L * s.cols));
    CHECK(cudaMalloc(&dd, nb * sizeof(float2)));
    CHECK(cudaMalloc(&dx, s.cols * sizeof(float)));
    CHECK(cudaMalloc(&dn, s.cols * sizeof(float)));
    CHECK(cudaMalloc(&dy, s.rows * sizeof(float)));
    CHECK(cudaMemcpy(dq, hq, L * s.cols, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dd, hd, nb * sizeof(float2), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dx, x, s.cols * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dn, nw, s.cols * sizeof(float), cudaMemcpyHostToDevice));
    float       *hy     = (float *)malloc(s.rows * sizeof(float));
    const size_t smem   = x_smem(s.cols, L);
    const auto   blocks = (unsigned)(s.rows / (RW * RT / 32));
    const xin    in     = {dq, dd, dx, dn, eps};
    for (int norm = 0; norm < 3; norm++) {
        auto fn = norm == 2 ? k_regs<L, 2> : norm ? k_regs<L, 1> : k_regs<L, 0>;
        CHECK(cudaMemset(dy, 0, s.rows * sizeof(float)));
        fn<<<blocks, RT, smem>>>(dw, s, in, dy);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(hy, dy, s.rows * sizeof(float), cudaMemcpyDeviceToHost));
        /* exact: h's codes from the device's float 1 / rms against the host's double one (a code
         * may round the other way): a looser bound */
        const double err = rel_l2(hy, norm == 1 ? ref_u : ref_h, s.rows), bound = norm == 2 ? 2e-3 : 1e-5;
        const double us  = sa_timed(REPS, [&](int r) {
            fn<<<blocks, RT, smem>>>(dw + (size_t)(r % copies) * bytes, s, in, dy);
        });
        const char *name = norm == 2 ? "regs+exact" : norm ? "regs+norm" : "regs";
        printf("%-10s %d %6lld x %-6lld %10.2f %10.0f %10.1e%s\n", name, L, (long long)s.rows, (long long)s.cols, us,
               bytes / us * 1e-3, err, err > bound ? "  FAILED" : "");
    }
    CHECK(cudaFree(dq));
    CHECK(cudaFree(dd));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dn));
    CHECK(cudaFree(dy));
    free(v), free(hq), free(uq), free(hd), free(ud), free(hw), free(hy), free(ref_h), free(ref_u);
}

int main(void)
{
    int dev = 0, l2 = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    const int64_t shapes[][2] = {{6144, 4096}, {14336, 4096}, {4096, 1024}, {3072, 1024}};
    printf("%-10s %s %14s %10s %10s %10s\n", "variant", "L", "rows x cols", "us", "GB/s", "rel L2");
    for (const auto &sh : shapes) {
        const shape   s      = {sh[0], sh[1], row_bytes(sh[1])};
        const int64_t bytes  = s.rows * s.row_b;
        const int     copies = (int)((8LL * l2 + bytes - 1) / bytes) + 1;
        uint8_t      *hw     = (uint8_t *)malloc(bytes), *dw;
        float        *x = (float *)malloc(s.cols * sizeof(float)), *nw = (float *)malloc(s.cols * sizeof(float));
        make_weights(hw, s);
        for (int64_t i = 0; i < s.cols; i++) x[i] = 3.0f * normal(), nw[i] = 0.5f + uniform();
        CHECK(cudaMalloc(&dw, (size_t)bytes * copies));
        for (int c = 0; c < copies; c++) CHECK(cudaMemcpy(dw + (size_t)c * bytes, hw, bytes, cudaMemcpyHostToDevice));
        run<1>(s, copies, dw, x, nw, 1e-6f); /* the engine's X8 (CELER_GPU_MVQ_X8=1) */
        run<2>(s, copies, dw, x, nw, 1e-6f); /* its default, two levels */
        CHECK(cudaFree(dw));
        free(hw), free(x), free(nw);
    }
    return 0;
}
