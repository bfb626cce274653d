#!/usr/bin/env python3
"""A hash of every kernel's machine code, with no GPU: each kernels/*.cu family is compiled by
NVRTC to a cubin as the decoder compiles it (the prelude, then the family's source; C++17, no
line info), and the bytes of each `.text.<kernel>` section of the cubin are hashed. Two trees
whose kernels print the same hashes run the same instructions: a refactor of the kernels'
source that prints no difference cannot change a result or a timing.

usage (from a repository root; ROOT defaults to this file's repository):
    L=$(.ci/nvrtc.sh); LD_LIBRARY_PATH=$L python3 scripts/kernels/kernel_text.py $L [sm_90] [FILTER] [ROOT] [OTHER_ROOT]

With OTHER_ROOT (e.g. `git worktree add DIR REV`), each kernel of both trees is compared
instruction by instruction (16 bytes each on sm_90): "same", or how many instructions differ
(a register renamed by the allocator shows up as a few differing instructions of equal count).
Definitions in GENAI_BRIDGE_NVRTC_DEFINES apply to both trees, as in kernel_regs.py (before
round 17 they were ignored here: a switch's variant printed the default's hashes).
"""
import hashlib
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_regs import ROOT, env_defines, nvrtc_compile, open_nvrtc  # noqa: E402


def cubin(nvrtc, root: Path, family: str, arch: str) -> bytes:
    """The family's cubin as the decoder compiles it (no line info), with the definitions of
    GENAI_BRIDGE_NVRTC_DEFINES as the decoder passes them."""
    rc, log, code = nvrtc_compile(nvrtc, family, arch, env_defines(), root)
    if rc:
        raise RuntimeError(f"{family}: compile failed\n{log[:2000]}")
    return code


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
    nvrtc, arch, only = open_nvrtc(sys.argv)
    root = Path(sys.argv[4]) if len(sys.argv) > 4 else ROOT
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
