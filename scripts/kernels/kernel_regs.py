#!/usr/bin/env python3
"""Registers, shared memory and spills of every kernel, as ptxas reports them, with no GPU: each
kernels/*.cu family is compiled by NVRTC for one architecture exactly as the decoder compiles it
(the prelude, then the family's source; C++17), plus `--ptxas-options=-v`.

usage (from the repository root):
    L=$(.ci/nvrtc.sh); LD_LIBRARY_PATH=$L python3 scripts/kernels/kernel_regs.py $L [sm_90] [FILTER]

Definitions in GENAI_BRIDGE_NVRTC_DEFINES (NAME=VALUE words) are passed as the decoder passes
them, so a tuning variant's registers can be read before it runs. KERNEL_FAMILY=NAME compiles
only kernels/NAME.cu. Exits 1 when a family does not compile (CI compiles each experiment
switch's variant this way: `.ci/run`).

With the registers and the block size, blocks per SM follow (65,536 registers per SM on sm_90,
allocated per warp in units of 256), hence how many waves a launch of a given grid takes.
"""
import ctypes
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def nvrtc_compile(nvrtc, family: str, arch: str, extra: list[bytes], root: Path = ROOT):
    """Compiles one family as the decoder does (the prelude, then the source; C++17) plus the
    `extra` options: (NVRTC's status, its log, the cubin or b"" when the compile failed)."""
    prelude = (root / "kernels" / "prelude.cuh").read_text()
    code = f'{prelude}\n#line 1 "{family}.cu"\n' + (root / "kernels" / f"{family}.cu").read_text()
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), f"{family}.cu".encode(), 0, None, None):
        return 1, "nvrtcCreateProgram failed", b""
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", *extra]
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, buf)
    cubin = b""
    if not rc:
        nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        out = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetCUBIN(prog, out)
        cubin = out.raw
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc, buf.value.decode(errors="replace"), cubin


def open_nvrtc(argv: list[str]):
    """(the NVRTC library in argv[1], the architecture argv[2] (sm_90), the filter argv[3] (""))."""
    nvrtc = ctypes.CDLL(str(Path(argv[1]) / "libnvrtc.so.13"))
    return nvrtc, argv[2] if len(argv) > 2 else "sm_90", argv[3] if len(argv) > 3 else ""


def env_defines() -> list[bytes]:
    """-D options from GENAI_BRIDGE_NVRTC_DEFINES, with the decoder's rule (compile.rs `defines`):
    words split on commas and spaces, each NAME=VALUE with NAME a C identifier and VALUE
    alphanumeric; a malformed word is an error, as in the decoder."""
    words = [w for w in re.split(r"[, ]", os.environ.get("GENAI_BRIDGE_NVRTC_DEFINES", "")) if w]
    bad = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9]+", w)]
    if bad:
        sys.exit(f"GENAI_BRIDGE_NVRTC_DEFINES: not NAME=VALUE: {bad}")
    return [f"-D{w}".encode() for w in words]


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    nvrtc, arch, only = open_nvrtc(sys.argv)
    failed = 0
    family = os.environ.get("KERNEL_FAMILY", "*")
    paths = sorted((ROOT / "kernels").glob(f"{family}.cu"))
    if not paths:
        print(f"no kernels/{family}.cu")
        return 1
    for path in paths:
        rc, log, _ = nvrtc_compile(nvrtc, path.stem, arch, [b"--ptxas-options=-v", *env_defines()])
        if rc:
            failed += 1
            print(f"{path.stem}: compile failed\n{log[:2000]}")
            continue
        entry = None
        for line in log.splitlines():
            m = re.search(r"Compiling entry function '(\w+)'", line)
            if m:
                entry = m.group(1)
            m = re.search(r"Used (\d+) registers(.*)", line)
            if m and entry and only in entry:
                print(f"{path.stem:18s} {entry:44s} {int(m.group(1)):4d} registers{m.group(2)}")
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and entry and only in entry and (m.group(1) != "0" or m.group(2) != "0"):
                print(f"{'':18s} {entry:44s} spills: {m.group(0)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
