#!/usr/bin/env bash
# The native decoder against ONNX Runtime's CUDA execution provider on the H200 machine: for
# every fixture and the conformance model, `genai-bridge parity` with ONNX Runtime CUDA as the
# reference (a), and native CUDA and native CPU under test (b): the provider the fp16 and bf16
# fixtures were built for (ONNX Runtime CPU has no bf16 MatMul at all). What to expect from each
# kind of fixture, and why the CPU-built int4 ones cannot agree with it: docs/cuda.md, round 28.
# One JSON report per pair in $OUT (stderr beside it), a line each on stdout.
#
# Needs the GPU build of ONNX Runtime 1.31.1 joined in $ORT_DIR (/tmp/ort-gpu): carry its parts
# over several calls with `STAGE_ORT_ONLY=1 bash benches/decode_h200.sh` (its header says how),
# then in a call on the same warm machine:
#   OUT=$OUT BIN=DIR/genai-bridge CONFORMANCE=carry/conf/tiny-random-gpt2-fp32 \
#       bash benches/ort_parity_h200.sh
# CONFORMANCE (optional): a copy of ../shared/conformance/tiny-random-gpt2-fp32, which does not
# travel with the tree; its prompts are its own ids (its 1,000-token vocabulary refuses the
# CLI's default text prompts). TOKENS (64) tokens are generated after each prompt.
# ONNX Runtime's CUDA EP runs fp32 MatMuls in TF32 unless its `use_tf32` option is "0", which
# puts it ~3e-2 from any fp32 reference (docs/cuda.md, round 28); so each model is compared through
# a copy of its folder under WORK_DIR (/tmp/ort-parity: links, and a genai_config.json whose
# CUDA options add use_tf32 "0").
# ORT_TF32=1 compares against the model's own options instead.
# LONG_MODELS (optional): model folders (e.g. the bench models of models/make_bench_models.py,
# whose context is 4,096) also compared at long prompts: LONG_LENGTHS ("700 3000") token ids
# drawn from a fixed seed below the model's vocabulary, LONG_TOKENS (32) tokens after each,
# native CUDA and (with LONG_CPU=1) native CPU against ONNX Runtime CUDA. The fixtures' context
# is 256, so this is where the attention's long-context layouts (more than one merge group past
# 512 positions) and the prompt path at thousands of positions meet the reference end to end.
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/h200_env.sh
out="${OUT:-ort-parity-out}" bin="${BIN:-carry/cuda/genai-bridge}" ort_dir="${ORT_DIR:-/tmp/ort-gpu}"
work="${WORK_DIR:-/tmp/ort-parity}"  # the linked model copies (scratch, not results)
mkdir -p "$out"
if [[ ! -f "$ort_dir/libonnxruntime.so.1.31.1" ]]; then
    echo "no ONNX Runtime GPU library in $ort_dir: join the parts first (see the header)" >&2
    exit 2
fi
site="$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
export ORT_LIB_PATH="$ort_dir"
export LD_LIBRARY_PATH="$site/nvidia/cu13/lib:$site/nvidia/cudnn/lib:$ort_dir:$LD_LIBRARY_PATH"

models=(models/fixtures/*/)
conformance="${CONFORMANCE:-}" conformance_prompts=""
conformance="${conformance%/}"
if [[ -n "$conformance" ]]; then
    models+=("$conformance")
    conformance_prompts="$out/conformance-prompts.txt"
    python3 - "$conformance/expected_ort_genai_0.18.json" >"$conformance_prompts" <<'PY'
import json, sys
for case in json.load(open(sys.argv[1]))["cases"]:
    print(",".join(map(str, case["prompt_ids"])))
PY
fi
# The folder the reference reads for model $1: the model itself under ORT_TF32=1, else a linked
# copy whose CUDA provider options say use_tf32 "0".
reference_dir() {
    [[ "${ORT_TF32:-0}" == 1 ]] && { echo "$1"; return; }
    local copy
    copy="$work/$(basename "$1")"
    rm -rf "$copy" && mkdir -p "$work" && cp -rs "$(realpath "$1")" "$copy" && rm "$copy/genai_config.json"
    python3 - "$1/genai_config.json" "$copy/genai_config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
options = config["model"]["decoder"].setdefault("session_options", {}).setdefault("provider_options", [])
cuda = next((o["cuda"] for o in options if "cuda" in o), None)
if cuda is None:
    options.append({"cuda": {"use_tf32": "0"}})
else:
    cuda["use_tf32"] = "0"
json.dump(config, open(sys.argv[2], "w"), indent=1)
PY
    echo "$copy"
}
# A report's one line: its verdict and figures, else the first line of what the run printed.
summary() {
    python3 - "$1.json" 2>/dev/null <<'PY' || head -1 "$1.err" | cut -c1-120
import json, sys
r = json.load(open(sys.argv[1]))
print("PASS" if r["pass"] else "FAIL", f'max|d| {r["max_abs_logit_diff"]:.3e} top-1 {r["top1_agreement"]:.4f}',
      f'(strict {r["top1_strict_agreement"]:.4f}) KL {r["kl_max"]:.2e}', "; ".join(r["failures"]))
PY
}
# Writes one prompt of each LONG_LENGTHS length for a model of vocabulary $2 to file $1.
long_prompts() {
    python3 - "$1" "$2" ${LONG_LENGTHS:-700 3000} <<'PY'
import random, sys
path, vocab, lengths = sys.argv[1], int(sys.argv[2]), map(int, sys.argv[3:])
rng = random.Random(20261202)
with open(path, "w") as f:
    for n in lengths:
        f.write(",".join(str(rng.randrange(vocab)) for _ in range(n)) + "\n")
PY
}
status=0
# One comparison: compare LABEL REPORT SECONDS DIR DEVICE TOKENS [parity options...]: ONNX
# Runtime CUDA on DIR against native on DEVICE, the JSON report in REPORT.json, a line printed.
compare() {
    local label=$1 report=$2 seconds=$3 dir=$4 device=$5 tokens=$6
    shift 6
    timeout "$seconds" "$bin" parity "$dir" "$@" --a ort --a-device cuda --b native \
        --b-device "$device" --tokens "$tokens" --json >"$report.json" 2>"$report.err"
    local rc=$?
    echo "$label: ort-cuda vs native-$device rc=$rc $(summary "$report")"
    [[ $rc == 0 ]] || status=1
}
for dir in "${models[@]}"; do
    [[ -f "$dir/genai_config.json" ]] || continue
    name=$(basename "$dir")
    prompts=()
    [[ "${dir%/}" == "$conformance" ]] && prompts=(--prompts "$conformance_prompts")
    ref=$(reference_dir "${dir%/}")
    for device in cuda cpu; do
        compare "$name" "$out/$name-$device" 120 "$ref" "$device" "${TOKENS:-64}" "${prompts[@]}"
    done
done
for dir in ${LONG_MODELS:-}; do
    [[ -f "$dir/genai_config.json" ]] || { echo "$dir: no genai_config.json" >&2; status=1; continue; }
    name=$(basename "$dir")
    vocab=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["vocab_size"])' \
        "$dir/genai_config.json")
    long_prompts "$out/$name-long-prompts.txt" "$vocab"
    ref=$(reference_dir "${dir%/}")
    devices=(cuda)
    [[ "${LONG_CPU:-0}" == 1 ]] && devices+=(cpu)
    for device in "${devices[@]}"; do
        compare "$name (long prompts ${LONG_LENGTHS:-700 3000})" "$out/$name-long-$device" 300 \
            "$ref" "$device" "${LONG_TOKENS:-32}" --prompts "$out/$name-long-prompts.txt"
    done
done
exit $status
