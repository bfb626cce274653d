#!/usr/bin/env python3
"""Whether the decode kernels still fetch weights before waiting for the kernel before them, in
the machine code, with no GPU. Under programmatic dependent launch a kernel starts while the one
before it finishes; the one-row GEMVs and the skip-norm issue their first weight loads, then
`griddepcontrol.wait` (pdl_wait), so the loads overlap the previous kernel's tail. The source
order is not enough: ptxas may schedule the wait first (it did in the int4 tensor-core kernel's
aligned specialisations, round 12). Each kernels/*.cu family is compiled by NVRTC as the decoder
compiles it, disassembled with cuobjdump, and every wait (ACQBULK) of the kernels named below
must have at least one global load since the launch_dependents before it (PREEXIT).

usage (from a repository root):
    L=$(.ci/nvrtc.sh); S=$(.ci/sass-tools.sh)
    LD_LIBRARY_PATH=$L python3 scripts/kernels/kernel_pdl.py $L $S [--quiet] [ROOT]

Prints the loads before each wait of every kernel (--quiet: only the offenders); exits 1 when a
kernel that must prefetch does not (or has no wait). Kernel variants come from GENAI_BRIDGE_NVRTC_DEFINES, as in the
decoder.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_regs import ROOT, env_defines, nvrtc_compile, open_nvrtc  # noqa: E402

# Kernels that must issue weight loads before each of their waits.
PREFETCHING = re.compile(r"^(gemv_decode_\w+|skip_norm_f32)$")


def sass_of(cubin: bytes, tools: Path) -> str:
    """The SASS listing of a cubin (cuobjdump runs nvdisasm from the same folder)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}
        return subprocess.run([str(tools / "cuobjdump"), "-sass", f.name], env=env,
                              capture_output=True, text=True, check=True).stdout


def loads_before_waits(sass: str) -> dict[str, list[int]]:
    """Per kernel: for each wait, the global loads since the launch_dependents before it."""
    out: dict[str, list[int]] = {}
    kernel, loads = None, 0
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            kernel, loads = m.group(1), 0
            out[kernel] = []
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if not (m and kernel):
            continue
        op = m.group(1)
        if "PREEXIT" in op:
            loads = 0
        elif "ACQBULK" in op:
            out[kernel].append(loads)
        elif re.search(r"\bLDG\b|\bLDG\.|\bLDGSTS\b", op):  # LDGSTS: cp.async
            loads += 1
    return out


def main(argv: list[str]) -> int:
    quiet = "--quiet" in argv
    argv = [a for a in argv if a != "--quiet"]
    if len(argv) < 3:
        print(__doc__)
        return 2
    nvrtc = open_nvrtc(argv[:2])[0]
    tools, root = Path(argv[2]), Path(argv[3]) if len(argv) > 3 else ROOT
    bad = []
    for source in sorted((root / "kernels").glob("*.cu")):
        family = source.stem
        rc, log, cubin = nvrtc_compile(nvrtc, family, "sm_90", env_defines(), root)
        if rc:
            print(f"{family}: compile failed\n{log[:2000]}")
            return 1
        for kernel, waits in sorted(loads_before_waits(sass_of(cubin, tools)).items()):
            must = bool(PREFETCHING.match(kernel))
            ok = not must or (waits and all(n > 0 for n in waits))
            if not (quiet and ok):
                print(f"{family:17} {kernel:40} loads before each wait {waits}"
                      f"{'' if ok else '  <- must prefetch'}")
            if not ok:
                bad.append(kernel)
    if bad:
        print(f"{len(bad)} kernel(s) wait before fetching: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
