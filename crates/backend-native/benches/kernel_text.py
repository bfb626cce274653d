#!/usr/bin/env python3
"""A hash of every kernel's machine code, with no GPU: each kernels/*.cu family is compiled by
NVRTC to a cubin as the decoder compiles it (the prelude, then the family's source; C++17, no
line info), and the bytes of each `.text.<kernel>` section of the cubin are hashed. Two trees
whose kernels print the same hashes run the same instructions: a refactor of the kernels'
source that prints no difference cannot change a result or a timing.

usage (from a repository root; ROOT defaults to this file's repository):
    L=$(.ci/nvrtc.sh); LD_LIBRARY_PATH=$L python3 crates/backend-native/benches/kernel_text.py $L [sm_90] [FILTER] [ROOT] [OTHER_ROOT]

With OTHER_ROOT (e.g. `git worktree add DIR REV`), each kernel of both trees is compared
instruction by instruction (16 bytes each on sm_90): "same", or how many instructions differ
(a register renamed by the allocator shows up as a few differing instructions of equal count).
"""
import ctypes
import hashlib
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[3]


def cubin(nvrtc, root: Path, family: str, arch: str) -> bytes:
    prelude = (root / "kernels" / "prelude.cuh").read_text()
    code = f'{prelude}\n#line 1 "{family}.cu"\n' + (root / "kernels" / f"{family}.cu").read_text()
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), f"{family}.cu".encode(), 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    if rc:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"{family}: compile failed\n{log.value.decode(errors='replace')[:2000]}")
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    out = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(prog, out)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return out.raw


def text_sections(elf: bytes) -> dict[str, bytes]:
    """The `.text.*` sections of a 64-bit little-endian ELF file, by kernel name."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name(offset: int) -> str:
        end = elf.index(b"\0", names_at + offset)
        return elf[names_at + offset:end].decode()

    out = {}
    for h in headers:
        n = name(h[0])
        if n.startswith(".text."):
            out[n[len(".text."):]] = elf[h[4]:h[4] + h[5]]
    return out


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    nvrtc = ctypes.CDLL(str(Path(sys.argv[1]) / "libnvrtc.so.13"))
    arch = sys.argv[2] if len(sys.argv) > 2 else "sm_90"
    only = sys.argv[3] if len(sys.argv) > 3 else ""
    root = Path(sys.argv[4]) if len(sys.argv) > 4 else HERE
    other = Path(sys.argv[5]) if len(sys.argv) > 5 else None
    for path in sorted((root / "kernels").glob("*.cu")):
        mine = text_sections(cubin(nvrtc, root, path.stem, arch))
        theirs = {}
        if other is not None and (other / "kernels" / path.name).exists():
            theirs = text_sections(cubin(nvrtc, other, path.stem, arch))
        for kernel, code in sorted(mine.items()):
            if only not in kernel:
                continue
            line = f"{path.stem:18s} {kernel:44s} {len(code):7d} bytes"
            if other is None:
                print(f"{line} {hashlib.sha256(code).hexdigest()[:16]}")
            elif kernel not in theirs:
                print(f"{line} (not in the other tree)")
            elif theirs[kernel] == code:
                print(f"{line} same")
            else:
                was = theirs[kernel]
                differ = sum(code[i:i + 16] != was[i:i + 16] for i in range(0, min(len(code), len(was)), 16))
                print(f"{line} {differ} instructions differ (other: {len(was)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
