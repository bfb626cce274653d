#!/usr/bin/env bash
# Where the decode attention's time goes, per machine instruction, on the H200 machine: ncu's full
# set with warp-state (PC) sampling on a few `attention_decode_f32` launches of eager decode steps
# (caches warm, clocks as they are), exported as the per-SASS-instruction source page and the
# details page, plus the kernel's own SASS listing from the same report. Round 15 of CUDA_NOTES
# says why: the post-wait path costs ~5 us a layer on the small shapes, and guessing which part
# (the q/k/v loads, the rotation, the tile's shuffles and exponentials, the merges) has not
# found it.
#
#   OUT=$OUT MODEL=/tmp/bench-models/qwen2.5-0.5b-fp16-cuda BIN=/tmp/b/bin/genai-bridge \
#       bash crates/backend-native/benches/attn_profile_h200.sh
# Environment: NCU (/usr/local/cuda/bin/ncu), SKIP (launches of the kernel skipped first: 200,
# past the prompt's and the warm-up's), COUNT (launches profiled: 4), KERNEL (a regex of kernel
# names: attention_decode), and the usual LD_LIBRARY_PATH / GENAI_BRIDGE_KERNEL_CACHE. Writes
# $OUT/attn.ncu-rep, $OUT/attn-source.csv (one row per SASS instruction with its samples by stall
# reason), $OUT/attn-details.csv and $OUT/attn-profile.log.
set -uo pipefail
cd "$(dirname "$0")/../../.."
: "${OUT:?set OUT}" "${MODEL:?set MODEL (a bench model folder)}"
NCU="${NCU:-/usr/local/cuda/bin/ncu}" BIN="${BIN:-carry/cuda/genai-bridge}"
mkdir -p "$OUT"
GENAI_BRIDGE_CUDA_GRAPH=0 timeout "${LIMIT_S:-300}" "$NCU" --set full --import-source no \
    --cache-control none --clock-control none -k "regex:${KERNEL:-attention_decode}" \
    --launch-skip "${SKIP:-200}" --launch-count "${COUNT:-4}" -f -o "$OUT/attn" \
    "$BIN" bench "$MODEL" --backend native --device cuda --prompt-tokens 128 \
    --decode-tokens 64 --runs 1 >"$OUT/attn-profile.log" 2>&1
echo "ncu rc=$?"
"$NCU" -i "$OUT/attn.ncu-rep" --page source --print-source sass --csv >"$OUT/attn-source.csv" \
    2>>"$OUT/attn-profile.log"
echo "source page rc=$? $(wc -l <"$OUT/attn-source.csv") lines"
"$NCU" -i "$OUT/attn.ncu-rep" --page details --csv >"$OUT/attn-details.csv" \
    2>>"$OUT/attn-profile.log"
echo "details page rc=$? $(wc -l <"$OUT/attn-details.csv") lines"
grep -E '"Duration"|Warp Cycles Per Issued|Issue Slots Busy|Achieved Occupancy' \
    "$OUT/attn-details.csv" | head -20
