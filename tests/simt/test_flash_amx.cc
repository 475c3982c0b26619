/* AMD's prefill attention (src/backends/gpu/gpu_flash_amx.cuh) run on the host (tests/simt/simt.h)
 * as the target SIMT_KIND would run it — WMMA11 as a wave32 RDNA 3 pass, MFMA16 as a wave64 CDNA pass
 * (MFMA32's f16 instruction is MFMA16's) — against attention in double precision over the same
 * paged cache. Built once a kind (tests/tests.cmake: test_flash_amx_wmma11, _mfma16).
 *
 * Each case, for heads of 64 and 128 and f32 and f16 caches: the relative L2 of the outputs
 * (q, k, v as given: the kernel's f16 roundings are its error) within 2e-3, NVIDIA's kernel's
 * bound in tests/gpu/test_gpu_ops.c, every element within 1e-2, every output row written, and
 * no WMMA operand whose lane halves disagree. Cases: one sequence of 100 tokens from position 0;
 * a continuous batch of three sequences in runs (one prefilling from position 30, one from 0,
 * one 20 tokens on from 100), with and without a window of 40; 64 rows of one sequence under a
 * window of 16, where a key tile is seen by some of the block's waves only (the others skip
 * it); grouped heads (4 query heads a kv head) and the paged cache's blocks shuffled. */
#include "backends/gpu/gpu_flash_amx.cuh"

#include <algorithm>

enum { BS = 16 /* cache positions a block */, H = 8, HK = 2 };

struct fcase {
    const char          *name;
    std::vector<int32_t> seq, pos; /* the batch's rows */
    int32_t              window;
};

static uint32_t rng = 0x2545f491u;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}
static float uni(void) { return (float)(next() >> 8) / 8388608.0f - 1.0f; } /* [-1, 1) */

template <int HD, typename KT> static int run(const fcase &c)
{
    const int64_t T = (int64_t)c.seq.size(), kw = HK * HD;
    int32_t       n_seq = 0, max_len = 0;
    for (int64_t t = 0; t < T; t++) n_seq = max(n_seq, c.seq[t] + 1), max_len = max(max_len, c.pos[t] + 1);
    const int32_t        max_blocks = (max_len + BS - 1) / BS, n_blocks = n_seq * max_blocks;
    std::vector<int32_t> tables((size_t)n_blocks); /* each sequence's blocks scattered over the pool */
    for (int32_t i = 0; i < n_blocks; i++) tables[(size_t)i] = i;
    for (int32_t i = n_blocks - 1; i > 0; i--) std::swap(tables[(size_t)i], tables[next() % (size_t)(i + 1)]);
    std::vector<float> kf((size_t)(n_blocks * BS * kw)), vf(kf.size()), q((size_t)(T * H * HD));
    std::vector<KT>    kc(kf.size()), vc(vf.size());
    for (size_t i = 0; i < kf.size(); i++) {
        kf[i] = uni(), vf[i] = uni();
        if (sizeof(KT) == 2) { /* an f16 cache holds the rounded values: the reference reads them */
            const uint16_t hk = gpu_f16_bits(kf[i]), hv = gpu_f16_bits(vf[i]);
            memcpy(&kc[i], &hk, 2), memcpy(&vc[i], &hv, 2);
            kf[i] = gpu_f16_val(hk), vf[i] = gpu_f16_val(hv);
        } else {
            memcpy(&kc[i], &kf[i], 4), memcpy(&vc[i], &vf[i], 4);
        }
    }
    for (float &x : q) x = 2.0f * uni();
    const float         scale = 1.0f / sqrtf((float)HD);
    std::vector<double> ref(q.size(), 0.0), sc((size_t)max_len);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const int32_t p = c.pos[(size_t)t], lo = c.window > 0 && p - c.window + 1 > 0 ? p - c.window + 1 : 0;
            const float  *qr = &q[(size_t)((t * H + h) * HD)];
            double        mx = -1e300, sum = 0.0;
            for (int32_t j = lo; j <= p; j++) {
                const int64_t slot = (int64_t)tables[(size_t)(c.seq[(size_t)t] * max_blocks + j / BS)] * BS + j % BS;
                const float  *kr   = &kf[(size_t)(slot * kw + h / (H / HK) * HD)];
                double        d    = 0.0;
                for (int i = 0; i < HD; i++) d += (double)qr[i] * kr[i];
                sc[(size_t)j] = d * scale, mx = std::max(mx, sc[(size_t)j]);
            }
            for (int32_t j = lo; j <= p; j++) sc[(size_t)j] = exp(sc[(size_t)j] - mx), sum += sc[(size_t)j];
            for (int32_t j = lo; j <= p; j++) {
                const int64_t slot = (int64_t)tables[(size_t)(c.seq[(size_t)t] * max_blocks + j / BS)] * BS + j % BS;
                const float  *vr   = &vf[(size_t)(slot * kw + h / (H / HK) * HD)];
                for (int i = 0; i < HD; i++) ref[(size_t)((t * H + h) * HD + i)] += sc[(size_t)j] / sum * vr[i];
            }
        }
    std::vector<float> out(q.size(), NAN); /* NaN where the kernel writes nothing */
    simt_bad_operands = 0;
    simt_launch(dim3((unsigned)((T + FL_ROWS - 1) / FL_ROWS), (unsigned)H), dim3(FL_THREADS), 0, [&] {
        k_flash_amx<HD, KT>(q.data(), kc.data(), vc.data(), c.pos.data(), c.seq.data(), tables.data(), max_blocks,
                            BS, T, H, HK, scale * 1.4426950408889634f, c.window, out.data());
    });
    double e2 = 0.0, r2 = 0.0, worst = 0.0;
    for (size_t i = 0; i < out.size(); i++) {
        const double d = (double)out[i] - ref[i];
        e2 += d * d, r2 += ref[i] * ref[i];
        worst = std::isfinite(d) ? std::max(worst, fabs(d)) : INFINITY;
    }
    const double rel = sqrt(e2 / r2);
    const bool   ok  = rel <= 2e-3 && worst <= 1e-2 && simt_bad_operands == 0;
    fprintf(ok ? stdout : stderr, "%-8s head %3d, %s cache, %3lld rows: rel L2 %.2e, worst %.2e, bad operands %ld%s\n",
            c.name, HD, sizeof(KT) == 2 ? "f16" : "f32", (long long)T, rel, worst, simt_bad_operands,
            ok ? "" : ": FAILED");
    return ok ? 0 : 1;
}

int main(void)
{
    std::vector<fcase> cases(4);
    cases[0].name = "one", cases[0].window = 0;
    for (int32_t p = 0; p < 100; p++) cases[0].seq.push_back(0), cases[0].pos.push_back(p);
    cases[1].name = "batch", cases[1].window = 0;
    for (int32_t p = 30; p < 100; p++) cases[1].seq.push_back(0), cases[1].pos.push_back(p);
    for (int32_t p = 0; p < 50; p++) cases[1].seq.push_back(2), cases[1].pos.push_back(p);
    for (int32_t p = 100; p < 120; p++) cases[1].seq.push_back(1), cases[1].pos.push_back(p);
    cases[2]      = cases[1];
    cases[2].name = "batch-w", cases[2].window = 40;
    cases[3].name = "window", cases[3].window = 16;
    for (int32_t p = 150; p < 214; p++) cases[3].seq.push_back(0), cases[3].pos.push_back(p);
    int fails = 0;
    for (const fcase &c : cases)
        fails += run<64, float>(c) + run<64, uint16_t>(c) + run<128, float>(c) + run<128, uint16_t>(c);
    if (fails) fprintf(stderr, "test_flash_amx (kind %d): %d case(s) failed\n", SIMT_KIND, fails);
    return fails != 0;
}
