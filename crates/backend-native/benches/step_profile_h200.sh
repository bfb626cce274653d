#!/usr/bin/env bash
# ncu's view of the step prototype's kernels on the H200 machine (CUDA_NOTES round 26, next step
# 1b): per launch of a kernel of `cuda_step` (`step_phase` by default: the launch form), its
# duration, instructions, warp cycles per instruction and memory throughput, for each binary
# given, so two builds (f32 against tagged activations) compare on one machine.
#
#   OUT=$OUT BINS="carry/step/cuda_step carry/step/cuda_step_tags" \
#       bash crates/backend-native/benches/step_profile_h200.sh
# Environment: NCU (/usr/local/cuda/bin/ncu), MODEL (qwen2.5-0.5b), VARIANTS (launches), KERNEL
# (a regex of kernel names: step_phase), SKIP (launches skipped first: 168, one 0.5B step of the
# launch form), COUNT (launches profiled: 7, one layer), LIMIT_S (per binary: 120). Writes
# $OUT/ncu-NAME.csv (ncu's details page) and $OUT/ncu-NAME.err per binary, and prints a summary.
set -uo pipefail
: "${OUT:?set OUT}" "${BINS:?set BINS (cuda_step binaries)}"
NCU="${NCU:-/usr/local/cuda/bin/ncu}"
mkdir -p "$OUT"
for bin in $BINS; do
    name=$(basename "$bin")
    GENAI_BRIDGE_NVRTC_DEFINES="${GENAI_BRIDGE_NVRTC_DEFINES:-SS_CMAX=4096}" \
        timeout "${LIMIT_S:-120}" "$NCU" --clock-control none --cache-control none \
        -k "regex:${KERNEL:-step_phase}" --launch-skip "${SKIP:-168}" --launch-count "${COUNT:-7}" \
        --section SpeedOfLight --section WarpStateStats --section InstructionStats \
        --section LaunchStats --csv --page details \
        "$bin" "${MODEL:-qwen2.5-0.5b}" --reps 2 --variants "${VARIANTS:-launches}" \
        >"$OUT/ncu-$name.csv" 2>"$OUT/ncu-$name.err"
    echo "$name rc=$? $(wc -l <"$OUT/ncu-$name.csv") lines"
done
python3 - "$OUT" $BINS <<'PY'
import collections, csv, os, sys
want = ("Duration", "Executed Instructions", "Registers Per Thread",
        "Warp Cycles Per Issued Instruction", "Memory Throughput")
for bin in sys.argv[2:]:
    name = os.path.basename(bin)
    rows = [r for r in csv.reader(open(f"{sys.argv[1]}/ncu-{name}.csv")) if len(r) > 10]
    if not rows:
        print(name, "no rows")
        continue
    col = {k: rows[0].index(k) for k in ("ID", "Grid Size", "Metric Name", "Metric Unit", "Metric Value")}
    per = collections.defaultdict(dict)
    for r in rows[1:]:
        if r[col["Metric Name"]] in want:
            per[(r[col["ID"]], r[col["Grid Size"]])][r[col["Metric Name"]]] = (
                f'{r[col["Metric Value"]]} {r[col["Metric Unit"]]}'.strip())
    print("==", name)
    for (launch, grid), metrics in per.items():
        print(launch, grid, "; ".join(f"{k}: {v}" for k, v in metrics.items()))
PY
