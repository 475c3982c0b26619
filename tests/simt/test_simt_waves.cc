/* The emulator's waves (tests/simt/simt.h) as the target SIMT_KIND runs them (WMMA11: wave32,
 * MFMA16: wave64): a collective some lanes of a wave skip runs among those that reach it (a
 * branch taken by part of the wave, or lanes already done), its values right; a read of a lane
 * that skipped it, and a block barrier some threads never reach, stop the program (each run in a
 * child process here, its exit checked). */
#include "backends/gpu/gpu_vendor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static int failed;
#define CHECK(c)                                                                                                    \
    do {                                                                                                            \
        if (!(c)) fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c), failed++;                  \
    } while (0)

enum { THREADS = 128 };

/* Lanes below 32 of each wave sum their group of 32 by shuffles; the others skip them (on wave64:
 * the upper half of each wave), or with done, return first. */
static void k_group_sums(float *out, bool done)
{
    const int lane = (int)(threadIdx.x % CELER_WARP);
    float     v    = (float)threadIdx.x;
    if (lane >= 32 && done) return;
    if (lane < 32)
        for (int m = 16; m > 0; m >>= 1) v += gpu_shfl_xor(v, m);
    if (!done) __syncthreads();
    out[threadIdx.x] = v;
}

static void check_group_sums(bool done)
{
    float out[THREADS];
    for (float &v : out) v = -1.0f;
    simt_launch(dim3(2), dim3(THREADS), 0, [&] { k_group_sums(out, done); });
    for (int t = 0; t < THREADS; t++) {
        const int lane = t % CELER_WARP, g0 = t - lane % 32; /* the group's first thread */
        const float want = lane < 32 ? 32.0f * (float)g0 + 496.0f : done ? -1.0f : (float)t; /* 0 + .. + 31 */
        if (out[t] != want) fprintf(stderr, "thread %d: %g, want %g\n", t, out[t], want);
        CHECK(out[t] == want);
    }
}

/* gpu_any among lanes below 8 of each wave, after two of every lane's true (both buffers full of
 * them): all false, then lane 3's true; the skipping lanes give nothing. */
static void check_any(void)
{
    int got[THREADS][2];
    simt_launch(dim3(1), dim3(THREADS), 0, [&] {
        const int  lane = (int)(threadIdx.x % CELER_WARP);
        const bool all  = gpu_any(true) && gpu_any(true);
        got[threadIdx.x][0] = lane < 8 ? (int)gpu_any(!all) : -1;
        got[threadIdx.x][1] = lane < 8 ? (int)gpu_any(lane == 3) : -1;
    });
    for (int t = 0; t < THREADS; t++) {
        const bool in = t % CELER_WARP < 8;
        CHECK(got[t][0] == (in ? 0 : -1));
        CHECK(got[t][1] == (in ? 1 : -1));
    }
}

/* What fn does in a child: its exit status (signal: 128 + the signal), its output kept out. */
template <typename F> static int in_child(F fn)
{
    fflush(stdout), fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(99);
        fn();
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* gpu_f16_val (the emulated matrix instructions' f16 operands) against the _Float16 cast, on all
 * 65,536 bit patterns: the same float, or NaN for NaN. */
static void check_f16_values(void)
{
    int bad = 0;
    for (uint32_t b = 0; b < 0x10000u; b++) {
        const uint16_t h16 = (uint16_t)b;
        _Float16       h;
        memcpy(&h, &h16, 2);
        const float want = (float)h, got = gpu_f16_val(b | 0xabcd0000u); /* the high bits ignored */
        if (isnan(want) ? !isnan(got) : celer_f32_bits(got) != celer_f32_bits(want)) bad++;
    }
    CHECK(bad == 0);
}

int main(void)
{
    check_f16_values();
    check_group_sums(false);
    check_group_sums(true);
    check_any();
    /* lanes below 16 read lanes 16 .. 31, which skip the shuffle: stopped (abort) */
    CHECK(in_child([] {
              static volatile float out[THREADS];
              simt_launch(dim3(1), dim3(THREADS), 0, [&] {
                  const int lane = (int)(threadIdx.x % CELER_WARP);
                  out[threadIdx.x] = lane < 16 ? gpu_shfl(1.0f, lane + 16) : 0.0f;
                  __syncthreads();
              });
              printf("%g\n", (double)out[0]);
          }) == 128 + SIGABRT);
    /* a block barrier the threads of the second wave never reach: stopped (exit 2) */
    CHECK(in_child([] {
              simt_launch(dim3(1), dim3(THREADS), 0, [&] {
                  if (threadIdx.x < CELER_WARP) __syncthreads();
              });
          }) == 2);
    printf("test_simt_waves (wave%d): %s (%d failed checks)\n", CELER_WARP, failed ? "FAILED" : "passed", failed);
    return failed ? 1 : 0;
}
