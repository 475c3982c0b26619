#!/usr/bin/env python3
"""A host model of the warp-group batch kernel's index math (k_mmq_w in dev/patches/sq-wgmma.diff,
src/backends/gpu/gpu_mmq_wgmma.cu once applied; its 16-token shape in sq-wgmma16.diff), line for
line: each thread's copies of the activations into a stage's B images (64 or 32 columns) and
token scales, each lane's A fragment from its weight words, the product as the PTX ISA defines
wgmma.mma_async.m64n{64,32}k32.s32.s8.s8 on those operands, each lane's sums and their scaling,
and where each output goes; against a plain product of the same integers. Written without a device, to check the kernel's indices before its first run; if
that run disagrees, the assumptions below are the place to look (the model and the kernel share
them, so they agree with each other either way):

  A: warp w of the group holds rows 16w .. 16w + 15 as mma.m16n8k32's A fragment (lane 4g + q:
     a0 row g, k 4q .. 4q + 3; a1 row g + 8; a2, a3 the same rows at k 16 + 4q ..).
  B: K-major without swizzling, element (k, n) at start + (n // 8) * SBO + (k // 16) * LBO +
     (n % 8) * 16 + k % 16 (LBO: between core matrices along k; SBO: along n).
  D: lane 4g + q of warp w holds d[4j + e] = row 16w + g + 8 (e // 2), column 8j + 2q + e % 2.

All three agree with CUTLASS's cute layouts for these instructions (ALayout_64x32, the K-major
no-swizzle descriptor's LBO 128 / SBO 256 bytes, CLayout_64xN), decoded by hand (dev/kernels/README.md).

    python3 dev/kernels/wgmma_model.py     # needs numpy; prints each shape's relative error
"""
import numpy as np

BQ = 8  # column blocks a stage


def sw_at(n, k):
    return (n // 8 * 2 + k // 16) * 128 + n % 8 * 16 + k % 16


def sw_tok(t, NT):
    return t % 8 // 2 * (NT // 4) + t // 8 * 2 + t % 2


def run(rng, fmt, rows, nb, T, kz0, kend, WG, NT, WS=False):
    IMG, XS = 2 * NT * 32, NT * 4  # a block's B bytes (2 NT columns), its tokens' d
    wb = 16 if fmt == "Q4_0" else 32
    lo_v, hi_v = (-8, 8) if fmt == "Q4_0" else (-127, 128)
    vals = rng.integers(lo_v, hi_v, size=(rows, nb, 32))
    ws = rng.uniform(-0.02, 0.02, size=(rows, nb)).astype(np.float16)
    codes = np.zeros((rows, nb, wb), np.int64)  # the row's code bytes as stored
    if fmt == "Q4_0":
        codes[:] = (vals[:, :, :16] + 8) | ((vals[:, :, 16:] + 8) << 4)
    else:
        codes[:] = vals & 0xFF
    hi = rng.integers(-127, 128, size=(T, nb, 32))
    lo = rng.integers(-127, 128, size=(T, nb, 32))
    d = rng.uniform(0.001, 0.01, size=(T, nb)).astype(np.float32)
    xq = np.concatenate([hi, lo], axis=2)  # X32: a block's 32 hi codes, then its 32 lo codes

    ref = np.zeros((T, rows))
    for b in range(kz0, kend):
        ref += (d[:, b, None] * ws[None, :, b].astype(np.float64)) * (256 * hi[:, b] @ vals[:, b].T + lo[:, b] @ vals[:, b].T)

    WB = wb
    WLD, CPR = BQ * WB + 16, BQ * WB // 16  # WS: a staged row's stride, its 16-byte pieces

    def frag(row, b, off, ok, staged=None):  # four code bytes of a row's block as A's signed bytes
        if not ok:
            return [0] * 4
        if staged is not None:  # WS: from the stage's copy (row: within the block, b: within the stage)
            c = [int(staged[row * WLD + WB * b + off + i]) for i in range(4)]
        else:
            c = [int(codes[row, b, off + i]) for i in range(4)]
        if fmt == "Q4_0":
            return c
        return [x - 256 if x > 127 else x for x in c]

    out = np.zeros((T, rows))
    for blk0 in range(0, rows, 64 * WG):
        acc = np.zeros((WG, 4, 32, NT // 8, 4))
        for s in range((kend - kz0 + BQ - 1) // BQ):
            k0 = kz0 + s * BQ
            nv = min(kend - k0, BQ)
            img = np.zeros(BQ * IMG, np.int64)
            scl = np.zeros(BQ * NT)
            XJ, SJ = 128 * WG // (4 * NT), 128 * WG // NT  # blocks between a thread's pieces
            for tid in range(128 * WG):  # the copy plan
                n, kh, ts, xb, sb = tid % (4 * NT) // 2, tid % 2, tid % NT, tid // (4 * NT), tid // NT
                t = n % NT
                for i in range(BQ // XJ):
                    j = xb + XJ * i
                    if t < T and j < nv:
                        src = 32 * (n // NT) + 16 * kh
                        at = sw_at(n, 16 * kh) + j * IMG
                        img[at : at + 16] = xq[t, k0 + j, src : src + 16]
                for i in range((BQ + SJ - 1) // SJ):
                    j = sb + SJ * i
                    if j < BQ and ts < T and j < nv:
                        scl[j * NT + sw_tok(ts, NT)] = d[ts, k0 + j]
            wimg = np.zeros(64 * WG * WLD, np.int64)  # WS: the stage's rows of codes, then scales
            wscl = np.zeros((64 * WG, BQ))
            if WS:
                WR = 128 * WG // CPR
                for tid in range(128 * WG):
                    wk, wr = tid % CPR, tid // CPR
                    for i in range(64 * WG // WR):
                        r = wr + WR * i
                        if 16 * wk // WB < nv and blk0 + r < rows:
                            src = [int(codes[blk0 + r, k0 + (16 * wk + i2) // WB, (16 * wk + i2) % WB]) for i2 in range(16)]
                            wimg[r * WLD + 16 * wk : r * WLD + 16 * wk + 16] = src
                    if tid < 64 * WG and blk0 + tid < rows:
                        for i in range(BQ):
                            if i < nv:
                                wscl[tid, i] = float(ws[blk0 + tid, k0 + i])
            for wg, w in [(a, b) for a in range(WG) for b in range(4)]:
                row0 = blk0 + 64 * wg
                for j in range(BQ):
                    A = np.zeros((16, 32), np.int64)
                    for lane in range(32):
                        g, q = lane // 4, lane % 4
                        ra, rb = row0 + 16 * w + g, row0 + 16 * w + g + 8
                        pa, pb = (ra if ra < rows else 0), (rb if rb < rows else 0)
                        if WS:
                            sr = 64 * wg + 16 * w + g  # the row within the block's stage
                            ua = frag(sr, j, 4 * q, j < nv, wimg)
                            ub = frag(sr + 8, j, 4 * q, j < nv, wimg)
                        else:
                            ua, ub = frag(pa, k0 + j, 4 * q, j < nv), frag(pb, k0 + j, 4 * q, j < nv)
                        if fmt == "Q4_0":  # low nibbles k 4q .., high nibbles k 16 + 4q .., minus 8
                            a = [[(x & 15) - 8 for x in ua], [(x & 15) - 8 for x in ub],
                                 [(x >> 4) - 8 for x in ua], [(x >> 4) - 8 for x in ub]]
                        else:
                            if WS:
                                a = [ua, ub, frag(sr, j, 16 + 4 * q, j < nv, wimg), frag(sr + 8, j, 16 + 4 * q, j < nv, wimg)]
                            else:
                                a = [ua, ub, frag(pa, k0 + j, 16 + 4 * q, j < nv), frag(pb, k0 + j, 16 + 4 * q, j < nv)]
                        A[g, 4 * q : 4 * q + 4], A[g + 8, 4 * q : 4 * q + 4] = a[0], a[1]
                        A[g, 16 + 4 * q : 20 + 4 * q], A[g + 8, 16 + 4 * q : 20 + 4 * q] = a[2], a[3]
                    lbo, sbo, start = sw_at(0, 16), sw_at(8, 0), j * IMG
                    B = np.array([[img[start + n // 8 * sbo + k // 16 * lbo + n % 8 * 16 + k % 16] for n in range(2 * NT)]
                                  for k in range(32)])
                    D = A @ B
                    for lane in range(32):
                        g, q = lane // 4, lane % 4
                        dd = [D[g + 8 * (e // 2), 8 * jj + 2 * q + e % 2] for jj in range(NT // 4) for e in range(4)]
                        ra, rb = row0 + 16 * w + g, row0 + 16 * w + g + 8
                        pa, pb = (ra if ra < rows else 0), (rb if rb < rows else 0)
                        if WS:
                            sr = 64 * wg + 16 * w + g
                            sw = [wscl[sr, j], wscl[sr + 8, j]]
                        else:
                            sw = [float(ws[pa, k0 + j]), float(ws[pb, k0 + j])] if j < nv else [0.0, 0.0]
                        dv = scl[j * NT + NT // 4 * q : j * NT + NT // 4 * (q + 1)]
                        for jt in range(NT // 8):
                            for e in range(4):
                                acc[wg, w, lane, jt, e] += sw[e // 2] * dv[2 * jt + e % 2] * (256 * dd[4 * jt + e] + dd[NT // 2 + 4 * jt + e])
        for wg, w in [(a, b) for a in range(WG) for b in range(4)]:
            for lane in range(32):
                g, q = lane // 4, lane % 4
                for jt in range(NT // 8):
                    for e in range(4):
                        r, t = blk0 + 64 * wg + 16 * w + g + 8 * (e // 2), 8 * jt + 2 * q + e % 2
                        if r < rows and t < T:
                            out[t, r] = acc[wg, w, lane, jt, e]
    return np.abs(out - ref).max() / np.abs(ref).max()


def main():
    rng = np.random.default_rng(1)
    worst = 0.0
    for fmt, WG, NT, WS in (("Q4_0", 1, 32, False), ("Q8_0", 1, 32, False), ("Q4_0", 2, 32, False),
                            ("Q8_0", 2, 32, False), ("Q4_0", 1, 16, False), ("Q8_0", 2, 16, False),
                            ("Q4_0", 1, 32, True), ("Q8_0", 1, 32, True), ("Q4_0", 2, 32, True), ("Q8_0", 2, 32, True)):
        # whole stages, a part's offset and short last stage, few tokens, rows past a block
        for rows, nb, T, kz0, kend in [(80, 16, NT, 0, 16), (70, 12, 9, 4, 12), (64, 20, 5, 0, 20), (130, 9, NT - 1, 0, 9)]:
            e = run(rng, fmt, rows, nb, T, kz0, kend, WG, NT, WS)
            worst = max(worst, e)
            print(f"{fmt}, {WG} warp group(s) a block, {NT}-token shape{', weights staged' if WS else ''}, rows {rows} "
                  f"blocks {kz0}..{kend} of {nb}, {T} tokens: relative error {e:.1e}")
    print("agrees" if worst < 1e-6 else "DISAGREES")
    return 0 if worst < 1e-6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
