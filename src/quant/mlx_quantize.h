/* The scalar reference MLX quantizer: the bytes mlx.core.quantize (mlx 0.32.4, CPU) writes, for
 * every mode, bit for bit. The layouts and the dequantizer are in quant/mlx_quant.h; this is the
 * other direction, for `celer quantize` (HF or GGUF weights -> an MLX directory mlx-lm loads).
 * tests/test_mlx_quantize.c checks every output byte against fixtures mlx wrote
 * (tests/reference/make_mlx_quantize_fixtures.py).
 *
 * Notation. T is the source dtype (F32, BF16 or F16); R(v) rounds a float32 v to T, to nearest
 * even (identity for F32). mlx has two quantizers, and they compute differently:
 *
 * Affine (one C++ kernel, fast::Quantize on the CPU): every value is widened to float32 and all
 * arithmetic is float32; only the stored scale and bias are rounded to T at the very end. The
 * codes are computed with the unrounded float32 scale and bias. Per group of g values w:
 *     hi, lo  = the largest and smallest w, NaN ignored (start at -inf and +inf)
 *     n       = 2^bits - 1;  eps = 1e-7 (as float32)
 *     s       = (hi - lo) / n, raised to eps if below (or if a zero range gives 0)
 *     if |lo| > |hi|:  s = +s, e = lo   else:  s = -s, e = hi   (ties take the maximum)
 *     q0      = rint(e / s)           (minus the code that zero will get)
 *     if q0 != 0:  s = e / q0, b = e  else:  b = 0   (q0 is 0 only when s was raised to eps
 *                                                      and |e| < eps / 2, e.g. all zeros)
 *     code    = clamp(rint((w - b) / s), 0, n)      NaN gives code 0
 *     stored  scale R(s), bias R(b)
 * So the bias is the group's extreme of larger magnitude, which code 0 reproduces exactly; when
 * that extreme is the maximum the scale is negative and codes count down from it. rint is round
 * half to even. The scale that mlx dequantizes with is R(s), not s: in BF16 a code can differ
 * from what the stored scale would suggest, which is why the codes follow s.
 *
 * The fp modes (on the CPU, plain ops, each in T: the float32 op then R):
 *     mxfp4, mxfp8 (groups of 32, E8M0 scale bytes; M = 6 for mxfp4, 448 for mxfp8):
 *         x    = R(max|w| / M)             max is NaN if any w is NaN
 *         t    = 0 if x == 0, else the smallest integer with 2^t >= x, i.e. ceil(log2 x), in T
 *                (mlx takes rint(log2 x) and adds 1 where 2^that < x: the same number)
 *         p    = R(2^t)                    (F16: 0 below 2^-24, inf above 2^15)
 *         v    = R(w / p)                  so |v| <= M (but for T's rounding of x)
 *         byte = R(t + 127) converted to uint8 through int32 (a negative byte wraps)
 *         mxfp4 code: the first k of the 16 E2M1 values l_k (0, .5, 1, 1.5, 2, 3, 4, 6, -0,
 *                     -.5, ..., -6) minimising |R(v - l_k)|: ties go to the smaller magnitude
 *                     (0.25 -> 0, 1.25 -> 1, 5 -> 4), a negative value that rounds to zero
 *                     gets +0 (code 0, never 8), and NaN or +-inf get code 0
 *         mxfp8 code: v as OCP E4M3, round to nearest even (2^-9 subnormal steps); above 464,
 *                     inf and NaN give +-448 by sign (0x7e, 0xfe), never the NaN code 0x7f
 *     nvfp4 (groups of 16, E4M3 scale bytes; optional float32 global scale G):
 *         k    = 2688 / G in float32 (2688 = 448 * 6), or 1 without G
 *         x    = R(max|w| / 6)
 *         byte = E4M3(x * k)                x * k in float32 (the f32 k promotes it), as above
 *         d    = R(E4M3 value of byte)      exact
 *         v    = R(w / d) * k              the division in T, the product in float32
 *         code: as mxfp4, but v - l_k is a float32 subtraction (v is float32 already)
 *     A group whose scale is 0 divides by 0: all its fp4 codes are 0.
 *
 * Things worth knowing: affine does not compute in T, and its far end can be up to a whole step
 * off (the scale is bent so that the edge and zero are exact, and the other extreme clamps);
 * mlx 0.32.4 rounds the E8M0 exponent up (earlier mlx rounded to nearest and saturated about
 * half the groups); a group of F32 or BF16 subnormals whose x is below 2^-127 gets a wrapped
 * byte (x = 2^-134 gives 249), which dequantizes to nonsense; and F16 values near 65504 can come
 * back as inf (mxfp4: 65472 / 6 rounds up to 2^14, code -4, -4 * 2^14 overflows).
 *
 * NaN and infinity in the input follow mlx on x86-64, and this code reproduces that on any CPU:
 * an affine group ignores NaN in its min and max (all NaN: scale NaN, bias -inf, codes 0), and
 * an infinite extreme gives a NaN scale and an infinite bias; in mxfp4 and mxfp8 a NaN or
 * infinite maximum makes the exponent -2^31 (int32's minimum through float32), so p = 0, byte
 * 0x80 for F32 and 0 for BF16 and F16, mxfp4 codes 0 and mxfp8 codes +-448 by the sign of w / 0
 * (0 / 0 is x86's negative default NaN; BF16 drops NaN signs); nvfp4 saturates such a group's
 * scale to 448 and quantizes its finite values against that. Stored NaNs are those of mlx's
 * conversions: BF16 0x7fc0, F16 sign | 0x7d00, F32 x86's quiet NaN (0xffc00000 when none came
 * in).
 *
 * Shapes: nvfp4 with an odd number of 16-wide groups in the whole tensor cannot be quantized by
 * mlx (its CPU path packs 32 values at a time); that is refused rather than written. */
#ifndef CELER_QUANT_MLX_QUANTIZE_H
#define CELER_QUANT_MLX_QUANTIZE_H

#include "quant/mlx_quant.h"

#include <stdint.h>

/* Quantizes rows [row0, row0 + n_rows) of the (q->rows, q->cols) matrix src, of src_dtype, into
 * the same rows of the three tensors of celer_mlx_quant_get_shapes(q): weight_out (rows, cols *
 * bits / 32) U32, scales_out (rows, cols / group_size) in q->dtype (affine) or U8, biases_out
 * (affine only, else NULL). src and the outputs are whole tensors, little-endian, any alignment;
 * only the selected rows are read and written, so threads can quantize disjoint row ranges of
 * the same tensors at once.
 *
 * src_dtype is the dtype mlx quantized in: F32, BF16 or F16. For affine it must be q->dtype (mlx
 * writes scales and biases in the input's dtype; round the source to the wanted dtype first, as
 * mlx-lm's convert does). For the fp modes q->dtype is the dtype mlx will dequantize to and does
 * not change the bytes. q->has_global_scale (nvfp4) quantizes with G = q->global_scale, which
 * must be finite and positive.
 *
 * CELER_ERR_INVALID, naming the argument, for a q that celer_mlx_quant_check refuses, a
 * src_dtype that is not F32, BF16 or F16 or not q->dtype for affine, a bad global scale, a row
 * range outside [0, q->rows], a NULL src, weight_out or scales_out, or biases_out missing for
 * affine or given for the fp modes; CELER_ERR_UNSUPPORTED for an nvfp4 tensor mlx cannot
 * quantize (see above). Nothing is written on failure. */
celer_status celer_mlx_quantize_rows(const celer_mlx_quant *q, const void *src, celer_st_dtype src_dtype, int64_t row0,
                                     int64_t n_rows, void *weight_out, void *scales_out, void *biases_out,
                                     celer_error *err);

#endif
