#!/usr/bin/env bash
# The GPU backend's checks on a machine with an NVIDIA GPU (docs/benchmarks/gpu-h200.md says how
# its numbers were taken). Steps, any of them in order (default: build test verify):
#   build    configure and build the CUDA backend (build-cuda/), sm_90a unless CELER_CUDA_ARCHS says
#   test     tests/test_ports, tests/test_batcher (its engines on the GPU: continuous batches of
#            mixed prefill and decode), tests/test_engine (the engine's generate there),
#            tests/gpu/test_gpu_formats, test_gpu_ops, test_gpu_ports, test_gpu_moe and
#            test_gpu_sample, each again under compute-sanitizer --tool memcheck; the first four also with
#            CELER_GPU_MMQ_FROM=0 (every Q4_0 / Q8_0 product on the integer matrix units, one-token
#            steps too), CELER_GPU_BLAS_FROM=0 (long products off cuBLAS: the tiled f32 kernel),
#            CELER_GPU_ATT_CHUNK=32 (decode attention in many splits, merged),
#            CELER_GPU_BLAS_PASSES=2 and =3 (the BLAS path in two and in three f16 passes: one is a
#            dense model's default, two an MoE model's),
#            CELER_GPU_KV_F16=1 (the KV cache in f16), CELER_GPU_ATT_MERGE_IN=0 (decode attention's
#            merge in a kernel of its own), CELER_GPU_MVQ_X8=1 (8-bit activations; test_batcher
#            too), CELER_GPU_ATT_WIDE=0 (short contexts' decode attention split) and
#            CELER_GPU_SQ_WIDE=0 and =1 (the batch kernel's other geometries), CELER_GPU_SQ_LONG=0
#            (its long rows' column parts as the others'),
#            CELER_GPU_MOE_STREAM=0 (a MoE prefill's experts on the tiled kernel),
#            CELER_GPU_MMQ_FROM=8 (steps of up to 8 tokens on the decode kernels),
#            CELER_GPU_NORM_ADD_SLICE=0 (a decode step's add_rmsnorm in one block a row),
#            CELER_GPU_MOE_COMBINE=0 (a MoE decode step's combine in a kernel of its own),
#            CELER_GPU_GLU_FUSE=0 (one-token gate/up products, then their GLU: three launches),
#            CELER_GPU_MVQ_XS=0 (one-token products reading their activations from global memory),
#            CELER_GPU_QKV_IN=0 (one-token q/k/v products, then the attention inputs' kernel),
#            CELER_GPU_MMQ_CHUNKED=0 (steps of 33 to 96 tokens on the tiled kernel, not in chunks),
#            CELER_GPU_ATT_MMA=0 (a batch's decode attention on k_attention, not the matrix units),
#            and test_batcher with CELER_GPU_MOE_GROUP=2 (MoE batches from 2 tokens grouped by expert
#            on the device; the default groups from 8, test_gpu_moe both ways). TEST_JOBS
#            (default 6) of these run at once; TEST_QUICK=1 runs each program once, without memcheck
#            and the variants (a minute instead of three, between changes; the whole step before a
#            change is called tested)
#   verify   celer verify --backend cuda --against cpu: the tiny MLX models of tests/data/mlx_dirs
#            and synthetic GGUF models of every weight type (small shapes)
#   big      synthetic Llama-3.1-8B and Qwen3-30B-A3B Q4_0 (celer synth): celer verify, and
#            verify --decode (32 decode steps a prompt against the same backend's prefill)
#   watchdog the 8B with a 1 us deadline: the first step past it fails the device (exit 3)
#   bench    the same files: celer bench (pp512, tg128, with CELER_GPU_STATS's step times; on the
#            8B also 32 sequences of 128 + 128 through the batcher), and llama.cpp's llama-bench
#            (LLAMA_BENCH) and llama-batched-bench (LLAMA_BATCHED_BENCH) on them in the same run
#            when those name their binaries; BENCH_DEPTH=D adds tg128 after D tokens of context
#            (celer bench -d, llama-bench -d), BENCH_MODELS picks the shapes
#   acceptance  issue 10's table: the 8B in Q4_0, Q4_K_M, Q8_0 and MLX affine4 g64, the 30B-A3B
#            and Qwen3-0.6B in Q4_0 (celer bench, llama-bench beside it with LLAMA_BENCH), the 8B's
#            batch of 32 (llama-batched-bench with LLAMA_BATCHED_BENCH); ~8 minutes with the files.
#            ACCEPT picks rows: q4_0 q4_k_m q8_0 mlx 30b 0.6b batch (the default: all)
#   mlx      issue 10's MLX row side by side: tg128 of the 8B in Q4_0 and in MLX affine4 g64 taken in
#            turn, MLX_ROUNDS rounds (default 3), and MLX ÷ Q4_0 of their medians (~3 minutes)
#   memory   peak device memory against the planner's estimate (CELER_GPU_STATS): celer generate
#            (a 422-token prompt), bench -p 512 -n 16 and 300 decode steps from an empty context
#            (bench -p 0 -n 300) of the 0.6B and the 8B Q4_0 (issue 10: within 10%, and no device
#            allocation inside a replayed decode step)
#   sample   sampled decode (bench --temp) with the draw on the GPU and on the host
#            (CELER_GPU_SAMPLE=0), beside greedy: tg128 of the 0.6B and the 8B in Q4_0 at
#            temperatures 0.1 and 1 (SAMPLE_TEMPS), taken in turn
#   kernels  dev/kernels/gpu_matmul.c (each format's matmul time and weight bandwidth),
#            gpu_attention.c (decode attention's time and cache bandwidth by context) and
#            gpu_flash.c (prefill attention's time and rate by length), gpu_moe.c (a 30B-A3B MoE
#            layer's time by tokens, choices even or skewed), gpu_glu.c (gate/up + GLU, the port as
#            CELER_GPU_GLU_FUSE sets it) and gpu_norm.c (RMSNorm and the fused
#            add + RMSNorm by width and rows, in a replayed step), tables printed whole; KERNELS picks them
#   xs       the one-token products with their activations staged in shared memory as the default
#            stages them (not in short grids of the simple formats) and never (CELER_GPU_MVQ_XS=0),
#            in the kernel harness at the 8B's, 0.6B's and 30B-A3B's dense
#            shapes, XS_FORMATS (default Q4_0 Q8_0 Q4_K Q6_K): µs each, side by side
#   blas     the cuBLAS path (on by default past 96 tokens; one f16 pass for dense models, two for
#            MoE models) in one, two and three passes (BLAS_PASSES): the verify step's models; and
#            pp512 of the 8B and the 30B-A3B with it off and with 3, 2 and 1 passes
#   early    decode with and without early launches (CELER_GPU_EARLY=0): tg128 of the 8B and the
#            30B-A3B, and the 8B's batch of 32
#   profile  ncu over a few steps run op by op (CELER_GPU_GRAPHS=0; caches and clocks as they are):
#            8B decode, 30B-A3B decode, the 8B's batch of 32 decodes, 8B and 30B-A3B pp512
#            prefills (PROFILES picks: decode-8b decode-30b x32-8b pp512-8b pp512-30b, and off by
#            default d4096-8b d2048-30b: decode after 4,096 / 2,048 tokens, their prefill too;
#            decode-8b-q4km, decode-8b-q8: the 8B's decode from a Q4_K_M or Q8_0 file; decode-0.6b:
#            Qwen3-0.6B's; pp512-8b-mlx: the 8B's prefill in MLX affine4 g64, the mlx step's
#            directory); only the models the chosen profiles need are made; each
#            kernel's time, DRAM throughput and occupancy (scripts/ncu-summary.py, top 12 printed)
#   stalls   ncu's warp-state and launch sections for the small kernels of a decode step (8B: the
#            one-block norm, attention, its inputs, the GLU; 30B-A3B: the router, the experts'
#            combine): what each waits on, for the next fusion or rewrite (logs/ncu-stalls-*.txt);
#            STALLS picks shapes, SHAPE:TYPE for another weight type's products (k_mmvq*), e.g.
#            STALLS=llama-3.1-8b:Q4_K_M; x32: the batch kernel (k_mmq_s) of the 8B's batch of 32,
#            with its pipes' use and instruction counts
#   trace    a trace build (build-cuda-trace: -DCELER_GPU_TRACE=ON) and TRACE_MODELS' decode (default
#            qwen3-0.6b llama-3.1-8b; `bench -p 0 -n TRACE_N`, 64) with CELER_GPU_TRACE=1: each replayed
#            step's kernels in order with what each costs the step (its dependency wait's release to the
#            next kernel's: src/backends/gpu/gpu_trace.cu) and how long it waited, then by kernel name
#            (logs/trace-*.txt); TRACE_P=N traces N sequences decoding together instead (`bench -p
#            TRACE_PROMPT -n TRACE_N -P N`, prompts of 16 by default: the server's batch; 128 with
#            TRACE_N=128 is the acceptance row's 128 + 128); TRACE_TYPE=T the weights' type (default Q4_0; MLX:
#            each shape's affine4 g64 directory, as ab's); run build first (its celer makes the models)
#   standalone  the standalone CUDA harnesses of dev/kernels (STANDALONE, default gpu_mvwait; also
#            gpu_mvnorm gpu_mvbulk gpu_readpat gpu_sqh gpu_sqr), built with nvcc for sm_90 and run
#            with STANDALONE_ARGS
#            (logs/standalone-*.txt); a FAILED row (an output against its reference) is counted
#   ab       variants side by side in one run (what a change is worth, on one machine's noise): AB
#            lists them, space-separated, each NAME or NAME:ITEM,ITEM.. where an item is a patch
#            file (applied with git apply to a copy of this tree, built apart) or ENV=VALUE (set
#            for its runs; dev/patches holds the pending ones); e.g. AB="base x8:CELER_GPU_MVQ_X8=1
#            k1:dev/patches/mvq-kquants-one-unit.diff". tg128 of the
#            8B and the 30B-A3B (AB_MODELS), AB_ROUNDS rounds (default 2) taking the variants in
#            turn; AB_PP=1 adds pp512; AB_P=N runs N sequences of 128 + 128 at once (bench -P, the
#            batcher: aggregate tok/s); AB_DEPTH=D measures after D tokens of context (bench -d); AB_TYPE=T the
#            weights' type (default Q4_0; Q4_K_M for dev/patches/mvq-kquants-one-unit.diff; MLX: each
#            shape's MLX affine4 g64 directory, the 8B's the mlx step's); AB_TEMP=T
#            sampled decode at temperature T (bench --temp). Last, `ab NAME steps`: how each variant's
#            steps ran (op by op, recorded, replayed; a short run with CELER_GPU_STATS=1, not timed).
#            base is the build step's own build (made
#            first where the machine has none). AB_TESTS="test_gpu_ports test_batcher .."
#            builds those programs in each patched tree too and runs them there first (logs/ab-NAME-*.log;
#            once a tree, whatever number of variants share it: a failure leaves them all untimed)
# Logs go to $OUT/logs-HHMMSS.tar.gz ($OUT defaults to ./gpu-out); the last lines printed are a
# short table of results — also when a signal (a `timeout` around the script) stops it, after
# the command in hand; `ab` prints each run's figure as it goes.
# Dependencies the machine lacks (cJSON, libmicrohttpd) are taken from .carry/deb when there: the
# contents of Debian's libcjson-dev, libcjson1, libmicrohttpd-dev and libmicrohttpd12 packages.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
B=${BUILD_DIR:-build-cuda}
# Synthetic models (tens of GB: the 30B-A3B alone is 17) go to memory when /dev/shm has room for
# them all (the lent machine's disk wrote the 30B-A3B's file at ~250 MB/s: ~70 s of device time
# each fresh machine), else to /tmp; SYNTH_DIR overrides.
synth_dir() {
    local shm_kb
    shm_kb=$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)
    if [ "${shm_kb:-0}" -gt $((40 * 1024 * 1024)) ] 2>/dev/null; then echo /dev/shm/celer-synth; else echo /tmp/celer-synth; fi
}
SYNTH=${SYNTH_DIR:-$(synth_dir)}
mkdir -p "$OUT/logs" "$SYNTH"
RESULTS=()
result() { RESULTS+=("$(printf '%-44s %s' "$1" "$2")"); }

DEB=$PWD/.carry/deb
DEPS=()
if [ -d "$DEB" ]; then
    export LD_LIBRARY_PATH=$DEB/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    DEPS=(-DCJSON_INCLUDE_DIR="$DEB/usr/include" -DCJSON_LIBRARY="$DEB/usr/lib/x86_64-linux-gnu/libcjson.so"
          -DMHD_INCLUDE_DIR="$DEB/usr/include" -DMHD_LIBRARY="$DEB/usr/lib/x86_64-linux-gnu/libmicrohttpd.so")
fi

# A warm lent machine keeps $B from its last call, and the tree copied to it keeps the files'
# own times: a source edited before that build ran looks older than its object, and ninja builds
# nothing (a whole experiment was once timed on the binary before it). So the sources whose
# content differs from what the last build in $B saw are touched first.
touch_changed_sources() {
    local now=$B/.celer-sources.new last=$B/.celer-sources
    mkdir -p "$B"
    git ls-files -co --exclude-standard -z | xargs -0r sha1sum | sort -k2 >"$now"
    [ -f "$last" ] && join -1 2 -2 2 -o 1.1,2.1,0 "$last" "$now" | awk '$1 != $2 {print $3}' | xargs -r touch
    return 0
}

step_build() {
    local t0=$SECONDS
    touch_changed_sources
    cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELER_CUDA=ON \
        -DCELER_CUDA_ARCHS="${CELER_CUDA_ARCHS:-90a}" "${DEPS[@]}" >"$OUT/logs/configure.log" 2>&1 &&
        cmake --build "$B" -j"$(nproc)" --target celer test_gpu_formats test_gpu_ops test_gpu_ports test_gpu_moe test_gpu_sample test_ports test_batcher test_engine >"$OUT/logs/build.log" 2>&1
    local rc=$?
    [ $rc = 0 ] && mv "$B/.celer-sources.new" "$B/.celer-sources"
    result "build (celer and the GPU tests)" "$([ $rc = 0 ] && echo ok || echo FAILED) in $((SECONDS - t0)) s"
    [ $rc = 0 ] || { tail -30 "$OUT/logs/build.log"; return 1; }
    "$B/celer" info >"$OUT/logs/info.txt" 2>&1
    sed -n '1,40p' "$OUT/logs/info.txt"
}

# A test program in the background (at most TEST_JOBS at once, default 6: the GPU and the cores
# have room, and the test step's two dozen runs took ~2 minutes one after another), its output
# into the log and its exit status into log.rc.
bg_test() {
    local log=$1
    shift
    while [ "$(jobs -rp | wc -l)" -ge "${TEST_JOBS:-6}" ]; do wait -n; done
    ( "$@" >"$log" 2>&1; echo $? >"$log.rc" ) &
}
bg_rc() { cat "$1.rc" 2>/dev/null || echo 255; }

step_test() {
    local t v have_cs=0 quick=${TEST_QUICK:-0}
    [ "$quick" != 1 ] && command -v compute-sanitizer >/dev/null && have_cs=1
    for t in test_ports test_batcher test_engine; do # their engines take the GPU (auto): mixed batches there
        bg_test "$OUT/logs/$t.log" "$B/$t"
    done
    # a batch's requests equal to each run alone with 8-bit activations too (the precision a token
    # takes must not depend on the kernels its step picked)
    bg_test "$OUT/logs/test_batcher-MVQ_X8=1.log" env CELER_GPU_MVQ_X8=1 "$B/test_batcher"
    # and with its MoE batches (4 sequences) grouped by expert on the device (the batch kernel's sums)
    bg_test "$OUT/logs/test_batcher-MOE_GROUP=2.log" env CELER_GPU_MOE_GROUP=2 "$B/test_batcher"
    for t in test_gpu_formats test_gpu_ops test_gpu_ports test_gpu_moe test_gpu_sample; do
        bg_test "$OUT/logs/$t.log" "$B/$t"
        [ $have_cs = 1 ] && bg_test "$OUT/logs/memcheck-$t.log" compute-sanitizer --tool memcheck --error-exitcode 9 "$B/$t"
    done
    # the ops, the ports and the experts again under settings that move them to other kernels
    local variants=("CELER_GPU_MMQ_FROM=0" "CELER_GPU_BLAS_FROM=0" "CELER_GPU_ATT_CHUNK=32" "CELER_GPU_BLAS_PASSES=2"
        "CELER_GPU_BLAS_PASSES=3" "CELER_GPU_KV_F16=1" "CELER_GPU_ATT_MERGE_IN=0" "CELER_GPU_MVQ_X8=1"
        "CELER_GPU_ATT_WIDE=0" "CELER_GPU_SQ_WIDE=0" "CELER_GPU_SQ_WIDE=1" "CELER_GPU_SQ_LONG=0"
        "CELER_GPU_MOE_STREAM=0" "CELER_GPU_MMQ_FROM=8" "CELER_GPU_NORM_ADD_SLICE=0" "CELER_GPU_MOE_COMBINE=0"
        "CELER_GPU_GLU_FUSE=0" "CELER_GPU_MVQ_XS=0" "CELER_GPU_QKV_IN=0" "CELER_GPU_MMQ_CHUNKED=0" "CELER_GPU_ATT_MMA=0"
        "CELER_GPU_CHECK=1"
        "CELER_GPU_CHECK=bad")
    [ "$quick" = 1 ] && variants=()
    for v in "${variants[@]}"; do
        for t in test_gpu_formats test_gpu_ops test_gpu_ports test_gpu_moe; do
            bg_test "$OUT/logs/$t-${v#CELER_GPU_}.log" env "$v" "$B/$t"
        done
    done
    wait
    for t in test_ports test_batcher test_engine test_batcher-MVQ_X8=1 test_batcher-MOE_GROUP=2; do
        result "$t" "$([ "$(bg_rc "$OUT/logs/$t.log")" = 0 ] && echo passed || echo FAILED)"
    done
    for t in test_gpu_formats test_gpu_ops test_gpu_ports test_gpu_moe test_gpu_sample; do
        result "$t" "$([ "$(bg_rc "$OUT/logs/$t.log")" = 0 ] && echo passed || echo FAILED) ($(grep -c '' "$OUT/logs/$t.log") lines)"
        tail -5 "$OUT/logs/$t.log"
        if [ $have_cs = 1 ]; then
            local rc
            rc=$(bg_rc "$OUT/logs/memcheck-$t.log")
            result "memcheck $t" "$([ "$rc" = 0 ] && echo clean || echo "FAILED rc=$rc") ($(grep -m1 'ERROR SUMMARY' "$OUT/logs/memcheck-$t.log"))"
        elif [ "$quick" = 1 ]; then
            result "memcheck $t" "not run (TEST_QUICK=1)"
        else
            result "memcheck $t" "compute-sanitizer not found"
        fi
    done
    # the long steps' self-checks (gpu_selfcheck.cu): silent where they pass (=1), and where they
    # are made to fail (=bad) all three notes said, the tiled kernel, cuBLAS and prefill attention's
    # kernel left off, every result still right
    local log ok note
    for v in "${variants[@]}"; do
        for t in test_gpu_formats test_gpu_ops test_gpu_ports test_gpu_moe; do
            log="$OUT/logs/$t-${v#CELER_GPU_}.log"
            ok=$([ "$(bg_rc "$log")" = 0 ] && echo passed || echo FAILED)
            note=$(grep -c 'disagreed with the' "$log")
            case "$v" in
                CELER_GPU_CHECK=1) [ "$note" = 0 ] || ok="FAILED (a self-check failed: $note notes)" ;;
                CELER_GPU_CHECK=bad)
                    grep -q "matrix units' product disagreed" "$log" && grep -q "cuBLAS's product disagreed" "$log" &&
                        grep -q "prefill attention on the matrix units disagreed" "$log" ||
                        ok="FAILED (a spoiled self-check passed)" ;;
            esac
            result "$t, $v" "$ok"
        done
    done
}

# One verify run: its total line into the table, the whole report into $OUT/logs/.
verify() {
    local name=$1 model=$2 log
    shift 2
    log="$OUT/logs/verify-$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '_').txt"
    "$B/celer" verify -m "$model" --backend cuda --against cpu "$@" >"$log" 2>&1
    local rc=$?
    result "verify $name" "rc=$rc $(grep -m1 -E '^total' "$log" | tr -s ' ' | cut -c1-80)"
}

step_verify() { step_verify_as ""; }

# The verify step's models, each result named with the prefix $1 (an environment under test).
step_verify_as() {
    local pre=${1:+$1 }
    for d in tests/data/mlx_dirs/*/; do
        case $d in *tiny-qwen2-*) continue ;; esac # their tokenizer has one id past the embeddings: refused on any backend
        verify "$pre$(basename "$d")" "$d" -n 16
    done
    for t in F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K; do
        f=$SYNTH/small-$t.gguf
        [ -f "$f" ] || "$B/celer" synth --shape qwen3-0.6b --layers 4 --type "$t" -o "$f" >/dev/null 2>&1
        verify "${pre}synth qwen3-0.6b/4 layers $t" "$f" -n 16
    done
    f=$SYNTH/small-moe.gguf
    [ -f "$f" ] || "$B/celer" synth --shape qwen3-30b-a3b --layers 2 --type Q4_K_M -o "$f" >/dev/null 2>&1
    verify "${pre}synth qwen3-30b-a3b/2 layers Q4_K_M" "$f" -n 16
    f=$SYNTH/small-gemma.gguf
    [ -f "$f" ] || "$B/celer" synth --shape gemma3-270m --type Q8_0 -o "$f" >/dev/null 2>&1
    verify "${pre}synth gemma3-270m Q8_0" "$f" -n 16
}

synth_big() {
    local type=${2:-Q4_0}
    f=$SYNTH/$1-$type.gguf
    [ -f "$f" ] || "$B/celer" synth --shape "$1" --type "$type" -o "$f" >"$OUT/logs/synth-$1-$type.log" 2>&1
}

# The backend's decode steps against its own prefill of the same tokens (celer verify --decode).
verify_decode() {
    local name=$1 model=$2 log
    shift 2
    log="$OUT/logs/verify-decode-$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '_').txt"
    "$B/celer" verify -m "$model" --backend cuda --decode "$@" >"$log" 2>&1
    local rc=$?
    result "verify --decode $name" "rc=$rc $(grep -m1 -E '^total' "$log" | tr -s ' ' | cut -c1-80)"
}

step_big() {
    for shape in llama-3.1-8b qwen3-30b-a3b; do
        synth_big $shape
        verify "$shape Q4_0" "$f" -n 8
        verify_decode "$shape Q4_0" "$f" -n 32
    done
}

# A step past the watchdog's deadline fails the device: one line, exit 3.
step_watchdog() {
    synth_big llama-3.1-8b
    CELER_GPU_WATCHDOG=0.000001 "$B/celer" generate -m "$f" --backend cuda --no-chat -p "hello there" -n 8 \
        >"$OUT/logs/watchdog.txt" 2>&1
    local wrc=$?
    result "watchdog (deadline 1 us, 8B)" "rc=$wrc $(grep -m1 -o 'did not finish.*' "$OUT/logs/watchdog.txt" | cut -c1-60)"
}

# celer bench pp512 / tg128 of one model (CELER_GPU_STATS's line recorded too), and llama-bench
# beside it when LLAMA_BENCH names it and the model is a GGUF file.
bench_model() {
    local name=$1 model=$2 log
    log="$OUT/logs/bench-$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '_').txt"
    CELER_GPU_STATS=1 "$B/celer" bench -m "$model" --backend cuda -p 512 -n 128 -r 3 >"$log" 2>&1
    result "celer bench $name" "$(grep -E 'pp512|tg128' "$log" | awk '{print $(NF-3), $(NF-2)}' | tr '\n' ' ')"
    result "  its steps (CELER_GPU_STATS)" "$(grep -m1 -o 'steps:.*' "$log" | cut -c1-100)"
    result "  its device allocations" "$(grep -m1 -o 'allocations:.*' "$log" | cut -c1-100)"
    result "  its device memory" "$(grep -m1 -o 'memory: peak.*' "$log" | cut -c1-100)"
    if [ -n "${LLAMA_BENCH:-}" ] && [ -f "$model" ]; then
        "$LLAMA_BENCH" -m "$model" -p 512 -n 128 -r 3 -ngl 99 -fa 1 -oe jsonl >"${log%.txt}-llama.txt" \
            2>"${log%.txt}-llama-err.txt"
        result "llama-bench $name" "$(grep -E 'pp512|tg128' "${log%.txt}-llama.txt" | awk -F'|' '{print $(NF-2), $(NF-1)}' | tr -s ' ' | tr '\n' ' ')"
        result "  its medians" "$(llama_medians "${log%.txt}-llama-err.txt")"
    fi
    [ -n "${BENCH_DEPTH:-}" ] || return 0
    local d=$BENCH_DEPTH
    CELER_GPU_STATS=1 "$B/celer" bench -m "$model" --backend cuda -p 0 -n 128 -d "$d" -r 3 >"${log%.txt}-d$d.txt" 2>&1
    result "celer bench $name @d$d" "$(grep -E 'tg128' "${log%.txt}-d$d.txt" | awk '{print $(NF-3), $(NF-2)}')"
    # whether the steps at depth replay as at an empty context (a step op by op costs ~1 ms)
    result "  its steps (CELER_GPU_STATS)" "$(grep -m1 -o 'steps:.*' "${log%.txt}-d$d.txt" | cut -c1-100)"
    if [ -n "${LLAMA_BENCH:-}" ] && [ -f "$model" ]; then
        "$LLAMA_BENCH" -m "$model" -p 0 -n 128 -d "$d" -r 3 -ngl 99 -fa 1 >"${log%.txt}-d$d-llama.txt" 2>&1
        result "llama-bench $name @d$d" "$(grep -E 'tg128' "${log%.txt}-d$d-llama.txt" | awk -F'|' '{print $(NF-2), $(NF-1)}' | tr -s ' ')"
    fi
}

# 32 sequences of 128 + 128 tokens through the batcher, and llama-batched-bench beside it.
bench_batched() {
    local name=$1 model=$2 log
    log="$OUT/logs/bench-batched-$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '_').txt"
    "$B/celer" bench -m "$model" --backend cuda -p 128 -n 128 -P 32 -r 3 >"$log" 2>&1
    result "celer bench $name x32" "$(grep -E 'pp128|tg128' "$log" | awk '{print $(NF-3), $(NF-2)}' | tr '\n' ' ')"
    if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then
        "$LLAMA_BATCHED_BENCH" -m "$model" -ngl 99 -fa 1 -c 16384 -npp 128 -ntg 128 -npl 32 >"${log%.txt}-llama.txt" 2>&1
        result "llama-batched-bench $name x32" "$(grep -E '^\|\s+128' "${log%.txt}-llama.txt" | tail -1 | tr -s ' ')"
    fi
}

step_bench() {
    for shape in ${BENCH_MODELS:-llama-3.1-8b qwen3-30b-a3b}; do
        synth_big $shape
        bench_model "$shape Q4_0" "$f"
        [ "$shape" = llama-3.1-8b ] && bench_batched "$shape Q4_0" "$f"
    done
}

# A shape (default the 8B) quantized to MLX affine 4-bit, groups of 64: its directory in m. The
# 8B from its shape in Q8_0 without Llama 3's RoPE scaling (a GGUF keeps its frequencies, which
# config.json cannot say); another shape from its Q4_0 file (synth_big's: the values are random
# either way, and a 30B-A3B in Q8_0 would take 32 GB more of the disk).
synth_mlx() {
    local shape=${1:-llama-3.1-8b} src
    m=$SYNTH/$shape-mlx-affine4-g64
    if [ "$shape" = llama-3.1-8b ]; then
        src=$SYNTH/llama-8b-shape-Q8_0.gguf
        [ -f "$src" ] || "$B/celer" synth --arch llama --layers 32 --embd 4096 --ff 14336 --heads 32 --kv-heads 8 \
            --vocab 128256 --type Q8_0 -o "$src" >"$OUT/logs/synth-llama-8b-shape-Q8_0.log" 2>&1
    else
        local was=${f:-}
        synth_big "$shape" Q4_0 && src=$f
        f=$was
    fi
    [ -d "$m" ] || "$B/celer" quantize "$src" "$m" --bits 4 --group-size 64 >"$OUT/logs/quantize-mlx-$shape.log" 2>&1
}

# The median of the numbers given.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'; }

# llama-bench's runs (its -oe jsonl lines in file $1) as "pp512 M tg128 M": the median of each
# test's samples, where its table gives their mean and deviation (its first pp run is often cold).
llama_medians() {
    local l np ng
    grep '^{' "$1" | while read -r l; do
        np=$(sed -E 's/.*"n_prompt": ([0-9]+).*/\1/' <<<"$l")
        ng=$(sed -E 's/.*"n_gen": ([0-9]+).*/\1/' <<<"$l")
        # shellcheck disable=SC2046 # the samples are words
        printf '%s %s ' "$([ "$ng" = 0 ] && echo "pp$np" || echo "tg$ng")" \
            "$(median $(sed -E 's/.*"samples_ts": \[([^]]*)\].*/\1/' <<<"$l" | tr ',' ' '))"
    done
}

# Issue 10's MLX row side by side: tg128 of the 8B's Q4_0 file and of its shape in MLX affine4 g64
# taken in turn, MLX_ROUNDS rounds (default 3), and the ratio of their medians.
step_mlx() {
    local r q4 tq=() tm=()
    synth_big llama-3.1-8b && q4=$f
    synth_mlx
    for r in $(seq 1 "${MLX_ROUNDS:-3}"); do
        "$B/celer" bench -m "$q4" --backend cuda -p 0 -n 128 -r 3 >"$OUT/logs/mlx-q4-$r.txt" 2>&1
        "$B/celer" bench -m "$m" --backend cuda -p 0 -n 128 -r 3 >"$OUT/logs/mlx-mlx-$r.txt" 2>&1
        tq+=("$(grep -m1 tg128 "$OUT/logs/mlx-q4-$r.txt" | awk '{print $(NF-3)}')")
        tm+=("$(grep -m1 tg128 "$OUT/logs/mlx-mlx-$r.txt" | awk '{print $(NF-3)}')")
    done
    result "mlx: tg128 Q4_0 (rounds)" "${tq[*]}"
    result "mlx: tg128 MLX affine4 g64 (rounds)" "${tm[*]}"
    result "mlx: MLX ÷ Q4_0 (medians; issue 10: >= 1)" \
        "$(awk -v a="$(median "${tq[@]}")" -v b="$(median "${tm[@]}")" 'BEGIN {if (a > 0) printf "%.3f", b / a}')"
}

# Issue 10's table: the 8B in Q4_0, Q4_K_M, Q8_0 and MLX affine 4-bit g64 (celer quantize of the
# Q8_0 file), the 30B-A3B and Qwen3-0.6B in Q4_0, and the 8B's batch of 32.
step_acceptance() {
    local r shape type row
    for row in ${ACCEPT:-q4_0 q4_k_m q8_0 mlx 30b 0.6b batch}; do
        case $row in
        q4_0) r="llama-3.1-8b Q4_0" ;; q4_k_m) r="llama-3.1-8b Q4_K_M" ;; q8_0) r="llama-3.1-8b Q8_0" ;;
        30b) r="qwen3-30b-a3b Q4_0" ;; 0.6b) r="qwen3-0.6b Q4_0" ;; batch) r="llama-3.1-8b Q4_0" ;;
        mlx) r="llama-8b-shape Q8_0" ;; # made below, not by a preset
        *) result "acceptance $row" "unknown row (q4_0 q4_k_m q8_0 mlx 30b 0.6b batch)"; continue ;;
        esac
        read -r shape type <<<"$r"
        f=$SYNTH/$shape-$type.gguf
        [ -f "$f" ] || [ "$row" = mlx ] ||
            "$B/celer" synth --shape "$shape" --type "$type" -o "$f" >"$OUT/logs/synth-$shape-$type.log" 2>&1
        case $row in
        mlx) synth_mlx && bench_model "llama-3.1-8b MLX affine4 g64" "$m" ;;
        batch) bench_batched "$shape $type" "$f" ;;
        *) bench_model "$shape $type" "$f" ;;
        esac
    done
}

# dev/kernels/$1.c linked against the build: $B/kernel_$1.
kernel_build() {
    local libs=(-L/usr/local/cuda/lib64 -lcudart -lcublas -lstdc++ -lcjson -lm -lpthread -Wl,-rpath,/usr/local/cuda/lib64)
    [ -d "$DEB" ] && libs=(-I"$DEB/usr/include" -L"$DEB/usr/lib/x86_64-linux-gnu" "${libs[@]}")
    cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -Itests "dev/kernels/$1.c" -Wl,--start-group \
        "$B/libceler_core.a" "$B/libceler_gpu.a" -Wl,--end-group "${libs[@]}" -o "$B/kernel_$1" \
        >"$OUT/logs/kernels-build-$1.log" 2>&1
}

step_kernels() {
    local k
    for k in ${KERNELS:-gpu_matmul gpu_attention gpu_flash gpu_moe gpu_norm gpu_glu}; do
        kernel_build "$k" || { result "kernels $k (build)" FAILED; continue; }
        "$B/kernel_$k" "${KERNEL_REPS:-30}" 2>&1 | tee "$OUT/logs/kernels-$k.txt"
        result "kernels $k" "$(grep -c 'FAILED' "$OUT/logs/kernels-$k.txt") failed checks"
    done
}

step_standalone() {
    local k
    for k in ${STANDALONE:-gpu_mvwait}; do
        nvcc -O3 -arch=sm_90 -std=c++17 -Iinclude -Isrc "dev/kernels/$k.cu" -o "$OUT/$k" \
            >"$OUT/logs/standalone-$k-build.txt" 2>&1 || { result "standalone $k (build)" FAILED; continue; }
        # shellcheck disable=SC2086 # the arguments are words
        "$OUT/$k" ${STANDALONE_ARGS:-} >"$OUT/logs/standalone-$k.txt" 2>&1
        result "standalone $k" "rc=$?, $(grep -c 'FAILED' "$OUT/logs/standalone-$k.txt") failed (logs/standalone-$k.txt)"
        rm -f "$OUT/$k"
    done
}

# The one-token products with x staged in shared memory where the default stages it (XS: not in the
# short grids of the simple formats, where the two figures are the same kernel) and never
# (CELER_GPU_MVQ_XS=0), in a replayed step, at the 8B's, the 0.6B's and the 30B-A3B's dense
# shapes: µs each, XS_FORMATS (default Q4_0 Q8_0 Q4_K Q6_K).
step_xs() {
    kernel_build gpu_matmul || { result "xs (build)" FAILED; return 0; }
    local t v
    for t in ${XS_FORMATS:-Q4_0 Q8_0 Q4_K Q6_K}; do
        for v in 1 0; do
            CELER_GPU_MVQ_XS=$v HARNESS_SHAPES=all HARNESS_STEP_ONLY=1 "$B/kernel_gpu_matmul" "${KERNEL_REPS:-30}" "$t" \
                >"$OUT/logs/xs-$t-$v.txt" 2>&1
        done
        result "xs $t: shape, µs default / without XS" "$(paste -d' ' <(awk '/step T=1/ {print $2 "=" $(NF-4)}' \
            "$OUT/logs/xs-$t-1.txt") <(awk '/step T=1/ {print $(NF-4)}' "$OUT/logs/xs-$t-0.txt") | tr '\n' ' ')"
    done
}

step_blas() {
    local p shape
    for p in ${BLAS_PASSES:-1 2 3}; do
        CELER_GPU_BLAS_PASSES=$p step_verify_as blas$p
    done
    for shape in llama-3.1-8b qwen3-30b-a3b; do
        synth_big $shape
        for p in 0 3 2 1; do
            CELER_GPU_BLAS_FROM=$([ $p = 0 ] && echo 0 || echo 64) CELER_GPU_BLAS_PASSES=$p \
                "$B/celer" bench -m "$f" --backend cuda -p 512 -n 0 -r 3 >"$OUT/logs/bench-blas$p-$shape.txt" 2>&1
            result "pp512 $shape, BLAS passes $p (0: off)" "$(grep -m1 -E 'pp512' "$OUT/logs/bench-blas$p-$shape.txt" | awk '{print $(NF-3), $(NF-2)}')"
        done
    done
}

step_early() {
    local e shape
    for shape in llama-3.1-8b qwen3-30b-a3b; do
        synth_big $shape
        for e in 0 1; do
            CELER_GPU_EARLY=$e "$B/celer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 >"$OUT/logs/bench-early$e-$shape.txt" 2>&1
            result "tg128 $shape, CELER_GPU_EARLY=$e" "$(grep -m1 -E 'tg128' "$OUT/logs/bench-early$e-$shape.txt" | awk '{print $(NF-3), $(NF-2)}')"
        done
    done
    synth_big llama-3.1-8b
    for e in 0 1; do
        CELER_GPU_EARLY=$e "$B/celer" bench -m "$f" --backend cuda -p 128 -n 128 -P 32 -r 3 >"$OUT/logs/bench-early$e-x32.txt" 2>&1
        result "8B x32, CELER_GPU_EARLY=$e" "$(grep -E 'pp128|tg128' "$OUT/logs/bench-early$e-x32.txt" | awk '{print $(NF-3), $(NF-2)}' | tr '\n' ' ')"
    done
}

# One ncu run of a command: its per-kernel summary into the logs, the top 12 printed.
profile() {
    local name=$1
    shift
    CELER_GPU_GRAPHS=0 ncu --cache-control none --clock-control none --print-summary per-kernel --csv \
        --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
        "$@" >"$OUT/logs/ncu-$name.csv" 2>"$OUT/logs/ncu-$name.err"
    echo "-- profile $name: $*"
    python3 scripts/ncu-summary.py "$OUT/logs/ncu-$name.csv" 40 >"$OUT/logs/ncu-$name.txt" 2>&1
    head -13 "$OUT/logs/ncu-$name.txt"
    result "profile $name" "$(tail -1 "$OUT/logs/ncu-$name.txt" | tr -s ' ' | cut -c1-60)"
}

step_profile() {
    command -v ncu >/dev/null || { result "profile" "ncu not found"; return 0; }
    local want=" ${PROFILES:-decode-8b decode-30b x32-8b pp512-8b pp512-30b} " item name shape type
    # name:shape:type:command — a model is made only when a chosen profile needs it
    for item in "decode-8b:llama-3.1-8b:Q4_0:generate -n 8" "decode-8b-q4km:llama-3.1-8b:Q4_K_M:generate -n 8" \
        "decode-8b-q8:llama-3.1-8b:Q8_0:generate -n 8" "decode-0.6b:qwen3-0.6b:Q4_0:generate -n 16" \
        "decode-30b:qwen3-30b-a3b:Q4_0:generate -n 4" "x32-8b:llama-3.1-8b:Q4_0:bench -p 16 -n 4 -P 32 -r 1" \
        "pp512-8b:llama-3.1-8b:Q4_0:bench -p 512 -n 1 -r 1" "pp512-30b:qwen3-30b-a3b:Q4_0:bench -p 512 -n 1 -r 1" \
        "d4096-8b:llama-3.1-8b:Q4_0:bench -p 0 -n 4 -d 4096 -r 1" \
        "d2048-30b:qwen3-30b-a3b:Q4_0:bench -p 0 -n 4 -d 2048 -r 1" \
        "pp512-8b-mlx:llama-3.1-8b:MLX:bench -p 512 -n 1 -r 1"; do
        IFS=: read -r name shape type cmd <<<"$item"
        [[ "$want" == *" $name "* ]] || continue
        if [ "$type" = MLX ]; then synth_mlx "$shape" && f=$m; else synth_big "$shape" "$type"; fi
        read -ra cmd <<<"$cmd"
        if [ "${cmd[0]}" = generate ]; then
            profile "$name" "$B/celer" generate -m "$f" --backend cuda --no-chat -p "hello there" "${cmd[@]:1}"
        else
            profile "$name" "$B/celer" bench -m "$f" --backend cuda "${cmd[@]:1}"
        fi
    done
}

step_stalls() {
    command -v ncu >/dev/null || { result "stalls" "ncu not found"; return 0; }
    local item shape type kernels mem run
    for item in ${STALLS:-llama-3.1-8b qwen3-30b-a3b}; do
        shape=${item%%:*} type=Q4_0
        [ "$item" != "$shape" ] && type=${item#*:}
        [ "$item" = x32 ] && shape=llama-3.1-8b
        synth_big $shape $type
        kernels='k_norm_slice|k_norm_vec|k_attention|k_attn_inputs|k_glu'
        [ $shape = qwen3-30b-a3b ] && kernels='k_router_route|k_combine|k_glu|k_norm_vec|k_norm_slice'
        mem=()
        run=("$B/celer" generate -m "$f" --backend cuda --no-chat -p "hello there" -n 4)
        [ $type != Q4_0 ] && kernels='k_mmvq' shape=$shape-$type mem=(--section MemoryWorkloadAnalysis)
        # the batch kernel of the 8B's batch of 32 decodes (its products past the prefill's)
        [ "$item" = x32 ] && kernels='k_mmq_s' shape=x32 \
            mem=(--section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats) &&
            run=("$B/celer" bench -m "$f" --backend cuda -p 16 -n 4 -P 32 -r 1)
        CELER_GPU_GRAPHS=0 ncu --cache-control none --clock-control none \
            --kernel-name regex:"$kernels" --launch-skip 200 --launch-count 8 "${mem[@]}" \
            --section LaunchStats --section Occupancy --section WarpStateStats --section SpeedOfLight \
            "${run[@]}" >"$OUT/logs/ncu-stalls-$shape.txt" 2>&1
        result "stalls $shape (logs/ncu-stalls-$shape.txt)" "$(grep -c 'Section: Warp State' "$OUT/logs/ncu-stalls-$shape.txt") kernels"
        grep -E '^  k_|^  void k_|Duration|Warp Cycles Per Issued|spends|Registers Per|Achieved Occupancy|L1/TEX Hit|Mem Busy|Mem Pipes|DRAM Through|Issue Slots Busy|Executed Ipc A|highest-utilized|Executed Instructions  ' \
            "$OUT/logs/ncu-stalls-$shape.txt" | cut -c1-160 | head -90
    done
}

# Peak device memory against the planner's estimate (CELER_GPU_STATS's line): generate at the
# What drawing sampled tokens on the GPU is worth: tg128 greedy, then at each temperature with
# the draw on the GPU and on the host, in turn (bench --temp: nothing cut, the walk in id order).
# Synthetic weights give flat distributions at temperature 1, peaked ones at 0.1.
step_sample() {
    local shape t v log
    for shape in ${SAMPLE_MODELS:-qwen3-0.6b llama-3.1-8b}; do
        synth_big "$shape"
        "$B/celer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 >"$OUT/logs/sample-$shape-greedy.txt" 2>&1
        result "sample $shape greedy" "$(grep -m1 tg128 "$OUT/logs/sample-$shape-greedy.txt" | awk '{print $(NF-3)}')"
        for t in ${SAMPLE_TEMPS:-0.1 1}; do
            for v in 1 0; do
                log="$OUT/logs/sample-$shape-t$t-gpu$v.txt"
                CELER_GPU_SAMPLE=$v "$B/celer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 --temp "$t" >"$log" 2>&1
                result "sample $shape T $t, draw on the $([ $v = 1 ] && echo GPU || echo host)" \
                    "$(grep -m1 tg128 "$log" | awk '{print $(NF-3)}')"
            done
        done
    done
}

# default context, and bench's prefill and decode (its engine sized for them), of the 0.6B and
# the 8B in Q4_0. The plan holds what a long prompt takes (the BLAS path's buffers, from 64
# tokens: gpu_blas.h), so generate's prompt is a long one; a short one leaves that unused.
step_memory() {
    local shape what log prompt
    prompt=$(printf 'the quick brown fox jumps over the lazy dog %.0s' $(seq 1 30))
    for shape in qwen3-0.6b llama-3.1-8b; do
        synth_big $shape
        for what in generate bench decode; do
            log="$OUT/logs/memory-$shape-$what.txt"
            case $what in
            generate) CELER_GPU_STATS=1 "$B/celer" generate -m "$f" --backend cuda --no-chat -p "$prompt" -n 4 >"$log" 2>&1 ;;
            bench) CELER_GPU_STATS=1 "$B/celer" bench -m "$f" --backend cuda -p 512 -n 16 -r 1 >"$log" 2>&1 ;;
            # 300 decode steps from an empty context: past the keys one wide block takes (the
            # attention's first split, inside a replayed step) and the split's doublings
            decode) CELER_GPU_STATS=1 "$B/celer" bench -m "$f" --backend cuda -p 0 -n 300 -r 1 >"$log" 2>&1 ;;
            esac
            result "memory $shape $what" "$(grep -m1 -o 'memory: peak.*' "$log" | cut -c9-100)"
            local replayed
            replayed=$(grep -m1 -o '[0-9]* inside replayed steps' "$log" | cut -d' ' -f1)
            result "  device allocations inside replayed steps" "$([ "${replayed:-x}" = 0 ] && echo 0 || echo "FAILED: ${replayed:-no line}")"
        done
    done
}

step_trace() {
    local B=$B-trace shape log rc # touch_changed_sources keeps this build's own record
    touch_changed_sources
    cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELER_CUDA=ON -DCELER_GPU_TRACE=ON \
        -DCELER_CUDA_ARCHS="${CELER_CUDA_ARCHS:-90a}" "${DEPS[@]}" >"$OUT/logs/trace-configure.log" 2>&1 &&
        cmake --build "$B" -j"$(nproc)" --target celer >"$OUT/logs/trace-build.log" 2>&1 ||
        { result "trace (build)" FAILED; tail -20 "$OUT/logs/trace-build.log"; return 0; }
    mv "$B/.celer-sources.new" "$B/.celer-sources"
    for shape in ${TRACE_MODELS:-qwen3-0.6b llama-3.1-8b}; do
        if [ "${TRACE_TYPE:-}" = MLX ]; then B=${B%-trace} synth_mlx "$shape" && f=$m; else B=${B%-trace} synth_big "$shape" "${TRACE_TYPE:-Q4_0}"; fi
        log="$OUT/logs/trace-$shape-${TRACE_TYPE:-Q4_0}.txt"
        if [ -n "${TRACE_P:-}" ]; then
            CELER_GPU_TRACE=1 "$B/celer" bench -m "$f" --backend cuda -p "${TRACE_PROMPT:-16}" -n "${TRACE_N:-64}" -P "$TRACE_P" -r 1 >"$log" 2>&1
        else
            CELER_GPU_TRACE=1 "$B/celer" bench -m "$f" --backend cuda -p 0 -n "${TRACE_N:-64}" -r 1 >"$log" 2>&1
        fi
        rc=$?
        result "trace $shape ${TRACE_TYPE:-Q4_0} (logs/${log##*/})" "rc=$rc, $(grep -c '^celer: trace of step' "$log") step graphs"
        grep -A40 "by kernel" "$log" | head -24
    done
}

# ab's model of a shape into $f: a synthetic GGUF file of AB_TYPE, or with AB_TYPE=MLX the shape's
# MLX affine4 g64 directory (synth_mlx's; the 8B's is the mlx step's).
ab_model() {
    if [ "${AB_TYPE:-}" = MLX ]; then synth_mlx "$1" && f=$m; else synth_big "$1" "${AB_TYPE:-Q4_0}"; fi
}

# A variant's build: the tree itself, or a copy with its patches applied (built once per set).
ab_build() {
    local patches=$1 dir
    [ -z "$patches" ] && { echo "$B"; return 0; }
    dir=/tmp/celer-ab/$(echo "$patches" | md5sum | cut -c1-10)
    if [ ! -x "$dir/build-cuda/celer" ]; then
        rm -rf "$dir" && mkdir -p "$dir" &&
            tar --exclude=./build --exclude='./build-*' --exclude=./.git --exclude=./tests/data --exclude=./gpu-out \
                -cf - . | tar -xf - -C "$dir" || return 1
        local p
        for p in ${patches//,/ }; do
            p=$(realpath "$p") && (cd "$dir" && git apply "$p") >>"$OUT/logs/ab-build.log" 2>&1 ||
                { echo "patch $p failed" >&2; return 1; }
        done
        (cd "$dir" && cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCELER_CUDA=ON \
            -DCELER_CUDA_ARCHS="${CELER_CUDA_ARCHS:-90a}" "${DEPS[@]}" && cmake --build build-cuda -j"$(nproc)" --target celer) \
            >>"$OUT/logs/ab-build.log" 2>&1 || { echo "build of $patches failed" >&2; return 1; }
    fi
    if [ -n "${AB_TESTS:-}" ]; then # shellcheck disable=SC2086 # the programs' names are words
        cmake --build "$dir/build-cuda" -j"$(nproc)" --target $AB_TESTS >>"$OUT/logs/ab-build.log" 2>&1 ||
            { echo "build of $patches' tests failed" >&2; return 1; }
    fi
    echo "$dir/build-cuda"
}

# AB_TESTS' programs (e.g. "test_gpu_ports test_gpu_moe test_batcher") run in a patched tree,
# from its root as the test step runs them: a patch is timed only after its tree passes them.
ab_tests() {
    local name=$1 dir=$2 t rc failed=0
    for t in $AB_TESTS; do
        (cd "${dir%/build-cuda}" && "$dir/$t") >"$OUT/logs/ab-$name-$t.log" 2>&1
        rc=$?
        result "ab $name $t" "$([ $rc = 0 ] && echo passed || echo "FAILED rc=$rc: not timed")"
        [ $rc = 0 ] || failed=1
    done
    return $failed
}

step_ab() {
    local v name spec item patches envs dirs=() names=() envsets=() round shape
    declare -A tested # a patched build's AB_TESTS, run once however many variants share it
    for v in ${AB:-base}; do
        name=${v%%:*} spec=$([ "$v" = "$name" ] || echo "${v#*:}") patches="" envs=""
        for item in ${spec//,/ }; do
            case $item in *=*) envs+="$item " ;; *) patches+="${patches:+,}$item" ;; esac
        done
        local d
        d=$(ab_build "$patches") || { result "ab $name" "build FAILED (logs/ab-build.log)"; continue; }
        if [ -n "$patches" ] && [ -n "${AB_TESTS:-}" ]; then
            if [ -z "${tested[$d]:-}" ]; then
                if ab_tests "$name" "$d"; then tested[$d]=passed; else tested[$d]=failed; fi
            fi
            [ "${tested[$d]}" = passed ] || { result "ab $name" "not timed: its build's tests failed"; continue; }
        fi
        names+=("$name") dirs+=("$d") envsets+=("$envs")
    done
    declare -A tg
    local pp=0 what=tg128
    [ "${AB_PP:-0}" = 1 ] && pp=512 what="pp512 tg128"
    [ "${AB_P:-1}" != 1 ] && pp=128 what="x${AB_P}: pp128 tg128 aggregate" # a batch: its prefill too
    local shape_args=(-d "${AB_DEPTH:-0}") # bench takes --parallel (a batch) or --depth (one sequence)
    [ "${AB_P:-1}" != 1 ] && shape_args=(-P "$AB_P")
    [ -n "${AB_TEMP:-}" ] && shape_args+=(--temp "$AB_TEMP") && what+=" T $AB_TEMP" # sampled decode
    for round in $(seq 1 "${AB_ROUNDS:-2}"); do
        for shape in ${AB_MODELS:-llama-3.1-8b qwen3-30b-a3b}; do
            ab_model "$shape"
            for i in "${!names[@]}"; do
                local log="$OUT/logs/ab-${names[$i]}-$shape-$round.txt"
                env ${envsets[$i]} "${dirs[$i]}/celer" bench -m "$f" --backend cuda -p "$pp" -n 128 "${shape_args[@]}" \
                    -r 3 >"$log" 2>&1
                local got
                got=$(grep -E 'pp[0-9]|tg128' "$log" | awk '{printf "%s ", $(NF-3)}')
                tg[$i,$shape]+="$got/ "
                echo "ab ${names[$i]} $shape round $round: $got" # as it goes: a time limit may stop the step
            done
        done
    done
    # how each variant's steps ran (CELER_GPU_STATS, one short run apart from the timed ones): a
    # variant whose steps fall to op by op (a graph refused at every replay) says so here, where
    # its tok/s alone once hid why decode ahead lost
    local steps=()
    for shape in ${AB_MODELS:-llama-3.1-8b qwen3-30b-a3b}; do
        ab_model "$shape"
        for i in "${!names[@]}"; do
            steps[$i]+="$shape: $(env ${envsets[$i]} CELER_GPU_STATS=1 "${dirs[$i]}/celer" bench -m "$f" --backend cuda \
                -p "$pp" -n 64 "${shape_args[@]}" -r 1 2>&1 | grep -m1 -o 'steps:[^;]*' |
                sed -E 's/ \(host [0-9]+ us each\)//g; s/^steps: //'); "
        done
    done
    for i in "${!names[@]}"; do
        for shape in ${AB_MODELS:-llama-3.1-8b qwen3-30b-a3b}; do
            result "ab ${names[$i]} $shape ($what @d${AB_DEPTH:-0})" "${tg[$i,$shape]}"
        done
        result "ab ${names[$i]} steps" "${steps[$i]:-}"
    done
}

# The tree's id as git would store it (its files as they are here, .carry left out): a lent
# machine's copy of a working tree keeps an older commit's history, so HEAD alone misnames it;
# compare with `git rev-parse --short=12 HEAD^{tree}` where the tree was committed.
tree_id() {
    local idx
    idx=$(mktemp -u)
    GIT_INDEX_FILE=$idx git add -A 2>/dev/null && GIT_INDEX_FILE=$idx git rm -rq --cached --ignore-unmatch .carry &&
        GIT_INDEX_FILE=$idx git write-tree 2>/dev/null | cut -c1-12
    rm -f "$idx"
}

# The logs as one archive (what comes back from a lent machine is a few files), then the table.
# Also on SIGTERM or SIGINT (a `timeout` around a step that ran long: bash takes the signal once
# the command in hand returns), so that what ran is not lost with the rest.
finish() {
    trap - TERM INT
    [ -d "$OUT/logs" ] && tar -czf "$OUT/logs-$(date +%H%M%S).tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
    echo
    echo "== gpu-check: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), tree $(tree_id || echo '?') (HEAD $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    printf '%s\n' "${RESULTS[@]}"
}
trap 'result "stopped" "by a signal, in step ${s:-?}"; finish; exit 143' TERM INT

steps=("$@")
[ ${#steps[@]} = 0 ] && steps=(build test verify)
# A fresh lent machine has no build, and every step but standalone runs $B's binaries (an `ab`
# without `build` once ran nothing but its patched trees' tests): build first when not asked.
if [ ! -x "$B/celer" ] && [[ " ${steps[*]} " != *" build "* ]] && [[ " ${steps[*]} " != " standalone " ]]; then
    echo "gpu-check: no $B/celer on this machine: the build step first"
    steps=(build "${steps[@]}")
fi
for s in "${steps[@]}"; do
    "step_$s" || break
done
finish
