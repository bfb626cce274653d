#!/usr/bin/env bash
# The native CUDA decoder on the H200 machine in ONE call of at most ~9 minutes: per-kernel
# checks against the CPU kernels, the device token choice against the host's, CUDA vs CPU
# parity on every fixture, weight paging (bitwise equal to resident), then the real shapes made
# with the builder and benched graph on (and eager for A/B), and an ncu per-kernel profile of
# eager decode steps. Every stage has its own timeout; later stages are skipped when time is
# short. Logs and a summary go to $OUT (or ./cuda-check-out).
#
# Build here (the GPU machine has no Rust), from the repository root:
#   cargo build --release --features cuda -p genai-bridge
#   cargo test --release -p genai-backend-native --features lab --no-run
#   mkdir -p carry/cuda && cp target/release/genai-bridge carry/cuda/
#   for t in cuda_kernels cuda_parity cuda_paging cuda_sampling; do
#       cp "$(ls -t target/release/deps/$t-* | grep -v '\.d$' | head -1)" carry/cuda/$t
#   done
#   strip carry/cuda/*
# and the builder package of onnxruntime-genai 0.18 (its onnxruntime_genai/models folder with an
# __init__.py stub) under carry/bench/site. Knobs:
#   STAGES       default "kernels sampling parity paging bench profile"; also detail, nsys
#   SHAPES       default "qwen2.5-1.5b qwen2.5-0.5b"; PRECISIONS default fp16
#   MODES        default "graph eager"; also nopdl, nogemm, pipe, nocluster, scalar4
#   DECODE_TOKENS (256), BUDGET_S (530), BIN_DIR (carry/cuda: where the binaries are)
#   PROFILE_SHAPE (qwen2.5-1.5b), PROFILE_PRECISION (fp16): the model profiled is
#                <shape>-<precision>-cuda, made by the bench stage
#   PROFILE_SKIP / PROFILE_COUNT: ncu launches skipped / profiled
#   PROFILE_CACHE: ncu --cache-control, all (default: caches flushed before each kernel) or none
#                (kept warm, as in a real step)
#   stage detail: one kernel with ncu --set full: PROFILE_KERNEL (a regex of its name),
#                PROFILE_DETAIL_SKIP (its launches skipped first)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-cuda-check-out}"
mkdir -p "$out"
. benches/h200_env.sh
stages=" ${STAGES:-kernels sampling parity paging bench profile nsys} "
bin="${BIN_DIR:-carry/cuda}"
models=/tmp/bench-models
start=$SECONDS
status=0
left() { echo $((${BUDGET_S:-530} - (SECONDS - start))); }
want() { [[ "$stages" == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm --format=csv | tee "$out/gpu.txt"

# Runs a test binary with a timeout; prints its verdict and time.
run_test() {
    local name=$1 limit=$2
    shift 2
    [[ -x "$bin/$name" ]] || { echo "$name: MISSING $bin/$name"; status=1; return; }
    timeout "$limit" "$bin/$name" "$@" >"$out/$name.log" 2>&1 || status=1
    echo "$name: $(grep -E '^test result' "$out/$name.log" | tail -1 | cut -c1-90), $((SECONDS - start)) s"
    grep -E "FAIL|DIFFER|panicked|NOT RUN" "$out/$name.log" | head -12
}

want kernels && run_test cuda_kernels 150 --test-threads=1 --nocapture
want sampling && run_test cuda_sampling 60 --test-threads=1 --nocapture
want parity && GENAI_PARITY_OUT="$out/parity.jsonl" run_test cuda_parity 150 --test-threads=1
want paging && run_test cuda_paging 120 --test-threads=1

# The real shapes: make each model once, bench graph on then eager.
if want bench && [[ -d carry/bench/site ]]; then
    for precision in ${PRECISIONS:-fp16}; do
        for shape in ${SHAPES:-qwen2.5-1.5b qwen2.5-0.5b}; do
            [[ $(left) -gt 90 ]] || { echo "$shape $precision: skipped, $(left) s left"; continue; }
            dir="$models/$shape-$precision-cuda"
            [[ -f "$dir/genai_config.json" ]] ||
                timeout 200 python3 models/make_bench_models.py --shape "$shape" \
                    --precision "$precision" --ep cuda --device cuda --out "$models" \
                    >>"$out/make.log" 2>&1
            [[ -f "$dir/genai_config.json" ]] || { echo "$shape $precision: not made"; tail -3 "$out/make.log"; continue; }
            for mode in ${MODES:-graph eager}; do
                # graph: the default (an empty switch is unset); eager: no graph; nopdl: graph, plain launches;
                # nogemm: graph, prompts through the GEMV kernels; pipe: graph, the one-row dense
                # GEMVs on the pipe rule (GENAI_BRIDGE_DECODE_GEMV); nocluster: graph, decode
                # attention merges its splits through global memory; scalar4: graph, int4
                # layers through the scalar one-row kernel instead of the tensor cores.
                GENAI_BRIDGE_CUDA_GRAPH=$([[ $mode == eager ]] && echo 0 || echo 1) \
                    GENAI_BRIDGE_PDL=$([[ $mode == nopdl ]] && echo 0 || echo 1) \
                    GENAI_BRIDGE_PREFILL_GEMM=$([[ $mode == nogemm ]] && echo 0 || echo 1) \
                    GENAI_BRIDGE_DECODE_GEMV=$([[ $mode == pipe ]] && echo pipe || echo auto) \
                    GENAI_BRIDGE_DECODE_CLUSTER=$([[ $mode == nocluster ]] && echo 0 || echo auto) \
                    GENAI_BRIDGE_INT4_MMA=$([[ $mode == scalar4 ]] && echo 0 || echo 1) \
                    timeout 90 "$bin/genai-bridge" bench "$dir" \
                    --backend native --device cuda --prompt-tokens 128 \
                    --decode-tokens "${DECODE_TOKENS:-256}" --runs 2 --json 2>&1 |
                    sed "s/^{/{\"mode\":\"$mode\",/" | tee -a "$out/bench.jsonl" | cut -c1-200
            done
        done
    done
fi

# Per-kernel times of eager decode steps (after the prompt) on one shape.
dir="$models/${PROFILE_SHAPE:-qwen2.5-1.5b}-${PROFILE_PRECISION:-fp16}-cuda"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if want profile && [[ -n "$ncu" && -f "$dir/genai_config.json" && $(left) -gt 60 ]]; then
    # The warm-up run's prompt takes ~8 launches per layer, each decode step ~7 per layer:
    # skipping PROFILE_SKIP (1000) launches lands inside the warm-up's decode steps.
    GENAI_BRIDGE_CUDA_GRAPH=0 timeout $(($(left) - 10)) "$ncu" --clock-control none \
        --cache-control "${PROFILE_CACHE:-all}" --metrics gpu__time_duration.sum,dram__bytes_read.sum \
        --launch-skip "${PROFILE_SKIP:-1000}" --launch-count "${PROFILE_COUNT:-400}" --csv \
        "$bin/genai-bridge" bench "$dir" --backend native --device cuda --prompt-tokens 128 \
        --decode-tokens 64 --runs 1 --json \
        >"$out/ncu.csv" 2>"$out/ncu.err"
    python3 benches/ncu_summary.py "$out/ncu.csv" | tee "$out/ncu.txt"
fi
# One kernel in full detail (occupancy, DRAM throughput, stall reasons): PROFILE_KERNEL names it
# (a regex of the kernel name), PROFILE_DETAIL_SKIP how many of its launches to skip first.
if want detail && [[ -n "$ncu" && -f "$dir/genai_config.json" && $(left) -gt 60 ]]; then
    GENAI_BRIDGE_CUDA_GRAPH=0 timeout $(($(left) - 10)) "$ncu" --clock-control none --set full \
        --kernel-name "regex:${PROFILE_KERNEL:-gemv_decode}" --launch-skip "${PROFILE_DETAIL_SKIP:-200}" \
        --launch-count 1 "$bin/genai-bridge" bench "$dir" --backend native --device cuda \
        --prompt-tokens 128 --decode-tokens 64 --runs 1 --json >"$out/ncu-detail.txt" 2>"$out/ncu-detail.err"
    grep -E "Duration|Throughput|Achieved Occupancy|Registers|Block Limit|Waves Per SM|Warp Cycles|Stall|L2 Hit|Theoretical" \
        "$out/ncu-detail.txt" | head -40
fi
# Kernel times inside the replayed graphs (nsys traces graph nodes; ncu cannot), when present.
nsys=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
if want nsys && [[ -n "$nsys" && -f "$dir/genai_config.json" && $(left) -gt 60 ]]; then
    timeout $(($(left) - 10)) "$nsys" profile --cuda-graph-trace=node -o /tmp/decode-trace -f true \
        "$bin/genai-bridge" bench "$dir" --backend native --device cuda --prompt-tokens 128 \
        --decode-tokens 64 --runs 1 --json >"$out/nsys.log" 2>&1
    "$nsys" stats --report cuda_gpu_kern_sum --format csv /tmp/decode-trace.nsys-rep \
        >"$out/nsys-kernels.csv" 2>>"$out/nsys.log"
    head -25 "$out/nsys-kernels.csv" | cut -c1-160
elif want nsys; then
    echo "nsys: not run (${nsys:-no nsys on this machine})"
fi
echo "done in $((SECONDS - start)) s, status $status; logs in $out"
exit $status
