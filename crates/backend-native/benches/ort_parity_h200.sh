#!/usr/bin/env bash
# The native decoder against ONNX Runtime's CUDA execution provider on the H200 machine: for
# every fixture and the conformance model, `genai-bridge parity` with ONNX Runtime CUDA as the
# reference (a), and native CUDA and native CPU under test (b). ONNX Runtime CPU is no oracle
# for the half-precision fixtures: it has no bf16 MatMul, and for fp16 it runs each MatMul chain
# in f32 behind inserted casts (CUDA_NOTES round 27), where a CUDA-built graph rounds every
# output to fp16. One JSON report per pair in $OUT (stderr beside it), a line each on stdout.
#
# Needs the GPU build of ONNX Runtime 1.31.1 joined in $ORT_DIR (/tmp/ort-gpu): carry its parts
# over several calls with `STAGE_ORT_ONLY=1 bash benches/decode_h200.sh` (its header says how),
# then in a call on the same warm machine:
#   OUT=$OUT BIN=DIR/genai-bridge CONFORMANCE=carry/conf/tiny-random-gpt2-fp32 \
#       bash crates/backend-native/benches/ort_parity_h200.sh
# CONFORMANCE (optional): a copy of ../shared/conformance/tiny-random-gpt2-fp32, which does not
# travel with the tree; its prompts are its own ids (its 1,000-token vocabulary refuses the
# CLI's default text prompts). TOKENS (64) tokens are generated after each prompt.
set -uo pipefail
cd "$(dirname "$0")/../../.."
. benches/h200_env.sh
out="${OUT:-ort-parity-out}" bin="${BIN:-carry/cuda/genai-bridge}" ort_dir="${ORT_DIR:-/tmp/ort-gpu}"
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
# A report's one line: its verdict and figures, else the first line of what the run printed.
summary() {
    python3 - "$1.json" 2>/dev/null <<'PY' || head -1 "$1.err" | cut -c1-120
import json, sys
r = json.load(open(sys.argv[1]))
print("PASS" if r["pass"] else "FAIL", f'max|d| {r["max_abs_logit_diff"]:.3e} top-1 {r["top1_agreement"]:.4f}',
      f'(strict {r["top1_strict_agreement"]:.4f}) KL {r["kl_max"]:.2e}', "; ".join(r["failures"]))
PY
}
status=0
for dir in "${models[@]}"; do
    [[ -f "$dir/genai_config.json" ]] || continue
    name=$(basename "$dir")
    prompts=()
    [[ "${dir%/}" == "$conformance" ]] && prompts=(--prompts "$conformance_prompts")
    for device in cuda cpu; do
        report="$out/$name-$device"
        timeout 120 "$bin" parity "$dir" "${prompts[@]}" --a ort --a-device cuda --b native \
            --b-device "$device" --tokens "${TOKENS:-64}" --json >"$report.json" 2>"$report.err"
        rc=$?
        echo "$name: ort-cuda vs native-$device rc=$rc $(summary "$report")"
        [[ $rc == 0 ]] || status=1
    done
done
exit $status
