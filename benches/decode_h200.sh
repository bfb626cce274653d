#!/usr/bin/env bash
# Batch-1 decode benchmark on the H200 machine, every engine side by side on the SAME weights, in
# one run: genai-bridge native CUDA (CUDA graph on, and eager for fp16), genai-bridge routed to the
# ONNX Runtime CUDA execution provider, and Hugging Face transformers (eager with a dynamic cache,
# and a StaticCache decode step compiled with torch.compile(mode="reduce-overhead", fullgraph=True)),
# plus the device's copy bandwidth measured once in the same run. One JSON line per measurement in
# $OUT/decode.jsonl; the Markdown table of benches/decode_table.py in $OUT/table.md.
#
# What must be in carry/ (paths from the repository root; built or fetched elsewhere, since the
# H200 machine has no Rust and no network):
#   carry/cuda/genai-bridge   cargo build --release --features cuda (the CLI), ~10 MB
#   carry/bench/site/onnxruntime_genai/   the model builder of onnxruntime-genai 0.18.0: the
#             package's onnxruntime_genai/models folder as it is, plus an onnxruntime_genai/__init__.py
#             stub (so `python3 -m onnxruntime_genai.models.builder` imports without the native
#             extension); models/make_bench_models.py runs it. The same folder check_h200.sh uses.
#   carry/ort/part_*          the GPU build of ONNX Runtime 1.31.1 in xz parts, made by
#             ../shared/tools/ort-gpu-parts.sh (see its header). The parts (~190 MB) are more than one
#             call may carry (64 MiB), so carry them over several calls to the same warm machine:
#             each run of this script copies the parts it finds in carry/ort/ to $ORT_PARTS
#             (/tmp/ort-parts) and, once all are there, joins them into $ORT_DIR (/tmp/ort-gpu):
#             libonnxruntime.so.1.31.1, libonnxruntime_providers_cuda.so,
#             libonnxruntime_providers_shared.so. ORT_LIB_PATH points there for the ORT rows. With
#             STAGE_ORT_ONLY=1 a run does only that. Without the joined library the ORT rows are
#             skipped (and recorded as skipped).
#   carry/ortgenai/onnxruntime_genai_cuda-0.18.0-cp312-cp312-manylinux_2_28_x86_64.whl  (optional,
#             16.7 MB, sha256 739f316a48045fbf572b04c77754e7b0a526343bdff32c0f2ee0b3b397688b60;
#             `python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12
#             --platform manylinux_2_28_x86_64 -d carry/ortgenai onnxruntime-genai-cuda==0.18.0`): the
#             official ONNX Runtime GenAI, measured by benches/ort_genai_peer.py with the EP's CUDA
#             graph off and on (the peer the issue's ORT targets name). It is installed into $OG_SITE
#             (/tmp/og-site) beside a stub `onnxruntime` package whose capi/ links the joined GPU
#             library (the package looks for its library there); the machine's own onnxruntime is
#             the CPU build. Checked against the sha256 above; a mismatch skips the rows. Carry it in
#             a call without an ORT part (a part and the wheel together exceed one call's carry).
# Used from the machine itself: python3 with torch (CUDA), transformers, onnx, onnx-ir, onnxruntime
# (CPU; the builder's int4 quantizer), /usr/local/cuda/lib64, and for the ONNX Runtime CUDA EP the
# torch environment's site-packages/nvidia/cu13/lib and nvidia/cudnn/lib. Nothing is downloaded.
#
# Invoke (from anywhere; it cds to the repository root):
#   OUT=$OUT BENCH_COMMIT=<commit measured> bash benches/decode_h200.sh
#   OUT=... SHAPES="qwen2.5-1.5b" PRECISIONS=fp16 bash benches/decode_h200.sh
# Environment:
#   OUT           results folder (default decode-bench-out): decode.jsonl, table.md, run.log, make.log
#   SHAPES        default "qwen2.5-0.5b qwen2.5-1.5b llama3-8b" (models/make_bench_models.py's shapes)
#   PRECISIONS    default "fp16 int4"; all shapes of the first precision run before the next one
#   BENCH_COMMIT  the commit the binary was built from; written into every line (the binary's own
#                 build stamp can be stale). Without it: git of this tree, else the binary's stamp.
#   MODELS_DIR    where the models are made and looked for (default /tmp/bench-models):
#                 <shape>-<precision>-cuda/ and the Hugging Face checkpoint hf-<shape>-float16/
#   SKIP_MAKE=1   reuse models made earlier on this machine (an earlier call, same warm machine)
#   MAKE_ONLY=1   only make the models (no bandwidth, no benchmarks)
#   MAKE_PARALLEL  with MAKE_ONLY, 1 (the default) makes every shape of a precision at once, one
#                 builder process each; 0 makes them in turn (the H200 machine made the four fp16
#                 shapes in turn in 198 s, at once in 82 s: docs/cuda.md, round 22)
#   BUDGET_S      wall-time budget in seconds (default 540): each step runs under `timeout` with
#                 what is left, a step that would start with less than MIN_STEP_S (15) left is
#                 skipped and recorded as {"kind":"skipped"}
#   HF_VARIANTS   default "eager compiled"; "" skips transformers
#   NATIVE=0      skip genai-bridge's native rows (e.g. a call that only adds the ORT rows)
#   ORT_GENAI=0   skip the ONNX Runtime GenAI rows (default: run them when the wheel and the ORT GPU
#                 library are there)
#   EAGER_ALL=1   native eager for int4 too (default: fp16 only)
#   ORT_GRAPH_PROBE=1  run the check of the ONNX Runtime CUDA EP's own CUDA graph (see below; off
#                 by default: genai-bridge's ORT route never lets the EP capture)
#   PROMPT_TOKENS (128), DECODE_TOKENS (256), RUNS (2 measured runs after one warm-up)
#
#   also: BENCH_PYTHON (python3), BIN (carry/cuda/genai-bridge), ORT_DIR, ORT_PARTS, ORT_CARRY
#   (carry/ort), WORK_DIR (/tmp/decode-bench, scratch), HF_DEVICE (cuda)
#
# Time (estimates, not yet measured together): making the models is the slow part: the 8B shape's
# checkpoint (16 GB) plus its fp16 and int4 exports take several minutes alone, and everything
# made for the default set is ~48 GB of /tmp. The benchmarks of the default set take ~7-8 minutes
# (transformers eager at ~15-30 tok/s and three torch.compile runs dominate). Each step's time is
# printed and recorded as a {"kind":"step"} line. So the default set takes several calls to one
# warm machine (each call starts within the machine's idle window of the last; $OUT comes back
# emptied per call, so concatenate the calls' decode.jsonl and run benches/decode_table.py on that).
# A plan that also moves the ONNX Runtime parts (a call carries at most 64 MiB, tree included),
# as round 6 ran it (binaries as an xz tarball beside a part; models, all of fp16 and int4, take
# ~250 s; native + transformers rows ~310 s; ORT rows ~50 s):
#   1. carry the binaries, carry/bench/site, carry/ort/part_aa:  the checks, then MAKE_ONLY=1
#      PRECISIONS="fp16 int4" (all shapes)
#   2. carry carry/ort/part_ab:  anything short (profiles, parity on the bench models)
#   3. carry carry/ort/part_ac:  SKIP_MAKE=1 PRECISIONS="fp16 int4" (native and transformers rows;
#      the ORT rows are skipped, the parts are not all there yet)
#   4. carry carry/ort/part_ad:  STAGE_ORT_ONLY=1 (copies the part)
#   5. carry carry/ortgenai:     STAGE_ORT_ONLY=1 (installs the ONNX Runtime GenAI wheel)
#   6. carry carry/ort/part_ae:  SKIP_MAKE=1 NATIVE=0 HF_VARIANTS="" PRECISIONS="fp16 int4" (the
#      ORT backend rows, the EP-graph probe, the ONNX Runtime GenAI rows graph off and on)
# Every call must come within the machine's idle window of the last; the calls' decode.jsonl
# (drop the "skipped: no ONNX Runtime GPU library" lines of call 3) concatenate into one run.
#
# The ONNX Runtime rows run with the model's own provider options, which the builder writes as
# {"cuda": {"enable_cuda_graph": "0"}}; genai-bridge's ORT backend hands every provider option to
# the EP, but its run loop (host-side input tensors, a growing attention mask, logits bound to the
# host, no gpu_graph_id run option for the prompt) does not meet what the EP's graph capture needs.
# The probe runs one model's greedy tokens through the ORT route with the EP's graph off and on
# (a sibling folder whose genai_config.json sets enable_cuda_graph "1") and records whether it
# works and agrees ({"kind":"ort_graph_probe"}); only if it does are graph-on ORT rows added.
# The route's captured step was deleted (crates/backend-ort/README.md): with the option on every
# run carries gpu_graph_id=-1, so "on" runs uncaptured and the probe is off unless asked for.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-decode-bench-out}"
mkdir -p "$OUT"
J="$OUT/decode.jsonl"
exec > >(tee -a "$OUT/run.log") 2>&1

SHAPES="${SHAPES:-qwen2.5-0.5b qwen2.5-1.5b llama3-8b}"
PRECISIONS="${PRECISIONS:-fp16 int4}"
MODELS="${MODELS_DIR:-/tmp/bench-models}"
BUDGET_S="${BUDGET_S:-540}"
MIN_STEP_S="${MIN_STEP_S:-15}"
PROMPT="${PROMPT_TOKENS:-128}"
DECODE="${DECODE_TOKENS:-256}"
RUNS="${RUNS:-2}"
HF_VARIANTS="${HF_VARIANTS-eager compiled}"
BIN="${BIN:-carry/cuda/genai-bridge}"
PY="${BENCH_PYTHON:-python3}"
ORT_DIR="${ORT_DIR:-/tmp/ort-gpu}"
ORT_PARTS="${ORT_PARTS:-/tmp/ort-parts}"
WORK="${WORK_DIR:-/tmp/decode-bench}"
MAKE_CAP=540 BENCH_CAP=240 HF_CAP=480 PROBE_CAP=120
mkdir -p "$WORK" "$MODELS"
T0=$SECONDS

export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$PWD/carry/bench/site${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export GENAI_BRIDGE_KERNEL_CACHE=/tmp/genai-kernels TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

COMMIT="${BENCH_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || true)}"
[[ -n "${BENCH_COMMIT:-}" ]] || echo "note: BENCH_COMMIT is not set; lines carry '${COMMIT:-the binary stamp}'"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
if [[ -n "$gpu" ]]; then
    MACHINE="${gpu%%,*} (driver ${gpu##*, }), ${cpu}, $(nproc) cores, linux"
else
    MACHINE="no GPU seen by nvidia-smi, ${cpu}, $(nproc) cores, linux"
fi
echo "== decode benchmark: $MACHINE; commit ${COMMIT:-?}; shapes: $SHAPES; precisions: $PRECISIONS"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm --format=csv 2>/dev/null
df -h "$MODELS" | tail -1
chmod +x "$BIN" 2>/dev/null

note() { "$PY" benches/decode_peers.py note --out "$J" "commit=${COMMIT:-unknown}" "$@"; }

# step NAME CAP CMD...: runs CMD under `timeout` (the smaller of CAP and the budget left), prints
# and records its wall time. STEP_OUT / STEP_ERR (set for the call) redirect CMD's output.
# Returns CMD's status, 124 on timeout, 99 when skipped for the budget.
step() {
    local name=$1 cap=$2
    shift 2
    local left=$((BUDGET_S - (SECONDS - T0)))
    if ((left < MIN_STEP_S)); then
        printf '[skip] %s: %d s of the budget left\n' "$name" "$left"
        note kind=skipped "step=$name" reason=budget "left_s=$left"
        return 99
    fi
    local limit=$((cap < left ? cap : left))
    local t rc dt
    t=$(date +%s.%N)
    if [[ -n "${STEP_OUT:-}" ]]; then
        timeout --kill-after=15 "$limit" "$@" >"$STEP_OUT" 2>"${STEP_ERR:-/dev/null}"
    else
        timeout --kill-after=15 "$limit" "$@"
    fi
    rc=$?
    dt=$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '[step] %-44s %7.1f s  rc=%d  (limit %d s, %d s of the budget used)\n' "$name" "$dt" "$rc" "$limit" \
        $((SECONDS - T0))
    note kind=step "step=$name" "seconds=$dt" "rc=$rc" "limit_s=$limit"
    return $rc
}

# --- ONNX Runtime GPU library: copy carried parts, join them once all are there ---------------
ORT_OK=0
ort_prepare() {
    if [[ -f "$ORT_DIR/libonnxruntime.so.1.31.1" && -f "$ORT_DIR/libonnxruntime_providers_cuda.so" ]]; then
        ORT_OK=1
        return
    fi
    mkdir -p "$ORT_PARTS" "$ORT_DIR"
    local p
    for p in "${ORT_CARRY:-carry/ort}"/part_*; do
        [[ -f "$p" ]] && cp -u "$p" "$ORT_PARTS/"
    done
    if ! compgen -G "$ORT_PARTS/part_*" >/dev/null; then
        echo "ONNX Runtime GPU: no parts in carry/ort or $ORT_PARTS; the ORT rows are skipped"
        return
    fi
    if cat "$ORT_PARTS"/part_* | xz -d 2>"$WORK/xz.err" | tar x -C "$ORT_DIR" 2>>"$WORK/xz.err" \
        && [[ -f "$ORT_DIR/libonnxruntime.so.1.31.1" && -f "$ORT_DIR/libonnxruntime_providers_cuda.so" ]]; then
        ORT_OK=1
        echo "ONNX Runtime GPU joined into $ORT_DIR from $(ls "$ORT_PARTS" | wc -l) parts"
    else
        rm -f "$ORT_DIR"/libonnxruntime*
        echo "ONNX Runtime GPU: parts incomplete so far ($(ls "$ORT_PARTS" | tr '\n' ' ')); the ORT rows are skipped"
    fi
}
ort_prepare
# --- ONNX Runtime GenAI (official CUDA package) over the joined GPU library ---------------------
# The wheel is installed into $OG_SITE by the first call that carries it (the parts may still be
# missing then); its rows run once the GPU library is joined too.
OG_OK=0 OG_SITE="${OG_SITE:-/tmp/og-site}"
OG_WHEEL="${OG_WHEEL:-carry/ortgenai/onnxruntime_genai_cuda-0.18.0-cp312-cp312-manylinux_2_28_x86_64.whl}"
OG_SHA=739f316a48045fbf572b04c77754e7b0a526343bdff32c0f2ee0b3b397688b60
og_prepare() {
    [[ "${ORT_GENAI:-1}" == 1 ]] || return
    if [[ ! -f "$OG_SITE/onnxruntime_genai/__init__.py" ]]; then
        [[ -f "$OG_WHEEL" ]] || { echo "ONNX Runtime GenAI: no wheel at $OG_WHEEL or in $OG_SITE; its rows are skipped"; return; }
        if [[ "$(sha256sum "$OG_WHEEL" | cut -d' ' -f1)" != "$OG_SHA" ]]; then
            echo "ONNX Runtime GenAI: $OG_WHEEL does not have the pinned sha256; its rows are skipped"
            return
        fi
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$OG_SITE" "$OG_WHEEL" \
            || { echo "ONNX Runtime GenAI: pip install failed; its rows are skipped"; return; }
        echo "ONNX Runtime GenAI installed into $OG_SITE"
    fi
    [[ $ORT_OK == 1 ]] || return
    # The package loads the library from an `onnxruntime` package's capi/ (the machine's own is
    # the CPU build): a stub package whose capi/ links the joined GPU library and its providers.
    mkdir -p "$OG_SITE/onnxruntime/capi"
    : >"$OG_SITE/onnxruntime/__init__.py"
    local lib
    for lib in "$ORT_DIR"/libonnxruntime*.so*; do ln -sf "$lib" "$OG_SITE/onnxruntime/capi/"; done
    OG_OK=1
}
og_prepare
[[ "${STAGE_ORT_ONLY:-0}" == 1 ]] && exit 0
SITE="$("$PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)"
ORT_LD="/usr/local/cuda/lib64:$SITE/nvidia/cu13/lib:$SITE/nvidia/cudnn/lib:$ORT_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"


# --- models --------------------------------------------------------------------------------------
make_model() { # SHAPE PRECISION
    local log="$WORK/make-$1-$2.log"
    STEP_OUT="$log" STEP_ERR="$log.err" step "make $1 $2" "$MAKE_CAP" "$PY" models/make_bench_models.py \
        --shape "$1" --precision "$2" --ep cuda --device cuda --out "$MODELS" --keep-hf
    local rc=$?
    cat "$log.err" "$log" >>"$OUT/make.log" 2>/dev/null
    grep -h '^\[' "$log.err" | tail -3
    [[ $rc == 0 ]] || note kind=error "step=make $1 $2" "rc=$rc" "stderr_tail=$(tail -c 1200 "$log.err" | tr '\n' ' ')"
    return $rc
}

# --- genai-bridge bench -------------------------------------------------------------------------
gb_bench() { # NAME SHAPE PRECISION DIR BACKEND GRAPH(0|1) [NOTE]
    local name=$1 shape=$2 prec=$3 dir=$4 backend=$5 graph=$6 gnote=${7:-}
    local envs=(GENAI_BRIDGE_CUDA_GRAPH="$graph")
    [[ $backend == ort ]] && envs=(ORT_LIB_PATH="$ORT_DIR" LD_LIBRARY_PATH="$ORT_LD")
    STEP_OUT="$WORK/bench.out" STEP_ERR="$WORK/bench.err" step "$name" "$BENCH_CAP" env "${envs[@]}" \
        "$BIN" bench "$dir" --backend "$backend" --device cuda --prompt-tokens "$PROMPT" \
        --decode-tokens "$DECODE" --runs "$RUNS" --json
    local rc=$?
    [[ $rc == 99 ]] && return
    local extra=()
    [[ -n "$gnote" ]] && extra=(--cuda-graph-note "$gnote")
    "$PY" benches/decode_peers.py fill --out "$J" --input "$WORK/bench.out" --stderr "$WORK/bench.err" \
        --rc "$rc" --model "$shape" --model-dir "$dir" --precision "$prec" --backend "$backend" \
        --cuda-graph "$graph" "${BWARG[@]}" --step "$name" --commit "$COMMIT" --machine "$MACHINE" "${extra[@]}"
}

# --- the ONNX Runtime CUDA EP's own CUDA graph through genai-bridge's ORT backend ---------------
PROBED=0 ORT_GRAPH_OK=0
ort_graph_probe() { # SHAPE DIR
    PROBED=1
    local shape=$1 dir=$2 gdir="$WORK/$(basename "$2")-ortgraph" n=32
    rm -rf "$gdir"
    "$PY" benches/decode_peers.py graph-dir "$dir" "$gdir" >/dev/null || return
    local ids
    ids=$(seq -s, 11 26)
    local args=(generate --backend ort --device cuda --prompt-ids "$ids" --max-new-tokens "$n"
        --min-length $((16 + n)) --json)
    STEP_OUT="$WORK/probe-off.json" STEP_ERR="$WORK/probe-off.err" step "ort-graph-probe off $shape" "$PROBE_CAP" \
        env ORT_LIB_PATH="$ORT_DIR" LD_LIBRARY_PATH="$ORT_LD" "$BIN" "${args[0]}" "$dir" "${args[@]:1}"
    local rc0=$?
    STEP_OUT="$WORK/probe-on.json" STEP_ERR="$WORK/probe-on.err" step "ort-graph-probe on $shape" "$PROBE_CAP" \
        env ORT_LIB_PATH="$ORT_DIR" LD_LIBRARY_PATH="$ORT_LD" "$BIN" "${args[0]}" "$gdir" "${args[@]:1}"
    local rc1=$?
    ((rc0 == 99 || rc1 == 99)) && return  # skipped for the budget: nothing to record
    "$PY" benches/decode_peers.py probe --out "$J" --commit "$COMMIT" --machine "$MACHINE" --model "$shape" \
        --model-dir "$(basename "$dir")" --off "$WORK/probe-off.json" --on "$WORK/probe-on.json" \
        --off-err "$WORK/probe-off.err" --on-err "$WORK/probe-on.err" --rc-off "$rc0" --rc-on "$rc1" --tokens "$n" \
        && ORT_GRAPH_OK=1
}

# --- bandwidth, once ---------------------------------------------------------------------------
BW="" BWARG=()
if [[ "${MAKE_ONLY:-0}" != 1 ]]; then
    STEP_OUT="$WORK/bw.json" STEP_ERR="$WORK/bw.err" step bandwidth 90 "$PY" benches/decode_peers.py bandwidth \
        --out "$J" --commit "$COMMIT" --machine "$MACHINE"
    BW=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["measured_bandwidth_gbs"])' \
        "$WORK/bw.json" 2>/dev/null)
    echo "copy bandwidth: ${BW:-?} GB/s"
    [[ -n "$BW" ]] && BWARG=(--bandwidth "$BW")
    [[ -n "$BW" ]] || tail -5 "$WORK/bw.err"
fi

# --- with MAKE_ONLY=1 and MAKE_PARALLEL=1 (its default): every shape of a precision at once ---
if [[ "${MAKE_ONLY:-0}" == 1 && "${MAKE_PARALLEL:-1}" == 1 && "${SKIP_MAKE:-0}" != 1 ]]; then
    for prec in $PRECISIONS; do
        echo "== $SHAPES $prec, made at once ($((SECONDS - T0)) s into the run)"
        makers=()
        for shape in $SHAPES; do
            make_model "$shape" "$prec" &
            makers+=($!)
        done
        for pid in "${makers[@]}"; do wait "$pid"; done
    done
    SKIP_MAKE=1  # the loop below only records the models that are missing
fi

# --- every precision, then every shape ---------------------------------------------------------
for prec in $PRECISIONS; do
    for shape in $SHAPES; do
        dir="$MODELS/$shape-$prec-cuda"
        echo "== $shape $prec ($((SECONDS - T0)) s into the run)"
        [[ "${SKIP_MAKE:-0}" == 1 ]] || make_model "$shape" "$prec"
        if [[ ! -f "$dir/genai_config.json" ]]; then
            echo "no model at $dir; skipped"
            note kind=skipped "model=$shape" "precision=$prec" reason="no model folder $dir"
            continue
        fi
        [[ "${MAKE_ONLY:-0}" == 1 ]] && continue

        if [[ "${NATIVE:-1}" == 1 ]]; then
            gb_bench "native graph $shape $prec" "$shape" "$prec" "$dir" native 1
            if [[ $prec == fp16 || "${EAGER_ALL:-0}" == 1 ]]; then
                gb_bench "native eager $shape $prec" "$shape" "$prec" "$dir" native 0
            fi
        fi

        if [[ $ORT_OK == 1 ]]; then
            g=$("$PY" benches/decode_peers.py graph-option "$dir")
            gb_bench "ort $shape $prec" "$shape" "$prec" "$dir" ort "$g" "enable_cuda_graph from the model's genai_config.json"
            if [[ $PROBED == 0 && "${ORT_GRAPH_PROBE:-0}" == 1 && $g == 0 ]]; then
                ort_graph_probe "$shape" "$dir"
            fi
            if [[ $ORT_GRAPH_OK == 1 && $g == 0 ]]; then
                gdir="$WORK/$(basename "$dir")-ortgraph"
                [[ -d "$gdir" ]] || "$PY" benches/decode_peers.py graph-dir "$dir" "$gdir" >/dev/null
                gb_bench "ort graph $shape $prec" "$shape" "$prec" "$gdir" ort 1 \
                    "enable_cuda_graph 1; tokens checked against graph off by the probe"
            fi
        else
            note kind=skipped "model=$shape" "precision=$prec" backend=ort reason="no ONNX Runtime GPU library"
        fi
        if [[ $OG_OK == 1 ]]; then
            step "ort-genai $shape $prec" "$BENCH_CAP" env PYTHONPATH="$OG_SITE" LD_LIBRARY_PATH="$ORT_LD" \
                "$PY" benches/ort_genai_peer.py "$dir" --out "$J" --model "$shape" --precision "$prec" \
                --prompt-tokens "$PROMPT" --decode-tokens "$DECODE" --runs "$RUNS" "${BWARG[@]}" \
                --commit "$COMMIT" --machine "$MACHINE"
        fi

        if [[ $prec == fp16 && -n "$HF_VARIANTS" ]]; then
            hf="$MODELS/hf-$shape-float16"
            if [[ -f "$hf/config.json" ]]; then
                step "transformers $shape" "$HF_CAP" "$PY" benches/decode_peers.py hf "$hf" --out "$J" \
                    --model "$shape" --model-dir "$dir" --variants "$HF_VARIANTS" --prompt-tokens "$PROMPT" \
                    --decode-tokens "$DECODE" --runs "$RUNS" "${BWARG[@]}" --commit "$COMMIT" \
                    --machine "$MACHINE" --device "${HF_DEVICE:-cuda}" --allow-graph-breaks
                rc=$?
                ((rc == 0 || rc == 99)) || note kind=error "step=transformers $shape" "model=$shape" "rc=$rc"
            else
                note kind=skipped "model=$shape" backend=transformers reason="no checkpoint $hf (made without --keep-hf?)"
            fi
        fi
    done
done

echo "== done in $((SECONDS - T0)) s"
df -h "$MODELS" | tail -1
if [[ "${MAKE_ONLY:-0}" != 1 ]]; then
    "$PY" benches/decode_table.py "$J" >"$OUT/table.md" && cat "$OUT/table.md"
fi
