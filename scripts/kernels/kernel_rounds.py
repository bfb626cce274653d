#!/usr/bin/env python3
"""How often each kernel waits on its own global loads after its PDL wait, read from the machine
code with no GPU (docs/cuda.md, round 15). A kernel must read what the kernel before it wrote after
`griddepcontrol.wait` (pdl_wait; `ACQBULK` in the SASS); when one read is used before the next
is issued, each is a dependent L2 round trip on the step's critical path. `round_act` between a
read and the next (a branch on the activation type) was enough to serialise them: ptxas does not
move a load above a branch.

Each kernels/*.cu family is compiled by NVRTC as the decoder compiles it and disassembled with
the pinned cuobjdump (kernel_pdl.py). The code after each ACQBULK, up to the next ACQBULK, is
read in program order straight through branches (a loop body counts once): a load (LDG, LD)
puts its destination registers on a pending list; an instruction reading a pending register is
a wait and clears the list. Printed per kernel and segment: `L2 W L16 W ...` is two loads, a
use of them, sixteen more loads, a use. Several specialised paths of one kernel follow each
other in the listing, so read a segment as the paths laid end to end.

usage (from a repository root):
    L=$(.ci/nvrtc.sh); S=$(.ci/sass-tools.sh)
    LD_LIBRARY_PATH=$L python3 scripts/kernels/kernel_rounds.py $L $S [FILTER]
        [--expect KERNEL=N ...]
FILTER: a substring of the kernel names to print. GENAI_BRIDGE_NVRTC_DEFINES as in the decoder,
so a switch's variant reads against the default; KERNEL_FAMILY=NAME compiles one family.
--expect KERNEL=N: exit 1 unless some segment of KERNEL issues at least N loads before its
first wait (CI holds the kernels that read their inputs in one round to it).
"""
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_pdl import sass_of  # noqa: E402
from kernel_regs import ROOT, env_defines, nvrtc_compile, open_nvrtc  # noqa: E402

INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?(\S+)\s*(.*?);")


def registers(operand: str) -> set[int]:
    """General registers an operand names (R4.64 names R4 and R5)."""
    out = set()
    for m in re.finditer(r"\bR(\d+)(\.64)?\b", operand):
        base = int(m.group(1))
        out |= {base, base + 1} if m.group(2) else {base}
    return out


def width(opcode: str) -> int:
    """Registers a load writes."""
    return 4 if ".128" in opcode else 2 if ".64" in opcode else 1


def rounds(sass: str) -> dict[str, list[str]]:
    """Per kernel: for each wait segment with loads, its L/W string."""
    out: dict[str, list[str]] = {}
    kernel, events, pending = None, None, set()

    def close():
        if kernel and events and "L" in events:
            text = re.sub(r"L+", lambda m: f"L{len(m.group(0))} ", "".join(events))
            out[kernel].append(re.sub(r"W+", "W ", text).strip())

    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            close()
            kernel, events, pending = m.group(1), None, set()
            out[kernel] = []
            continue
        m = INSTRUCTION.search(line)
        if not m or kernel is None:
            continue
        opcode, args = m.groups()
        if opcode == "ACQBULK":
            close()
            events, pending = [], set()
            continue
        if events is None:
            continue
        operands = [a.strip() for a in args.split(",")] if args else []
        is_load = re.match(r"LDG\b|LDG\.|LD\.|LD\b", opcode) is not None
        if is_load or opcode.startswith("ST") or not operands or operands[0].startswith(("P", "UP")):
            sources = registers(args) if not is_load else registers(args.split("[", 1)[-1])
        else:
            sources = registers(",".join(operands[1:]))
        if sources & pending:
            events.append("W")
            pending = set()
        if is_load and operands:
            first = re.match(r"R(\d+)", operands[0])
            if first:
                base = int(first.group(1))
                pending |= set(range(base, base + width(opcode)))
            events.append("L")
    close()
    return out


def first_run(segment: str) -> int:
    """Loads a segment issues before its first wait."""
    m = re.match(r"L(\d+)", segment)
    return int(m.group(1)) if m else 0


def main(argv: list[str]) -> int:
    expect: dict[str, int] = {}
    while "--expect" in argv:
        at = argv.index("--expect")
        name, _, count = argv[at + 1].partition("=")
        expect[name] = int(count)
        del argv[at:at + 2]
    if len(argv) < 3:
        print(__doc__)
        return 2
    nvrtc = open_nvrtc(argv[:2])[0]
    tools, only = Path(argv[2]), argv[3] if len(argv) > 3 else ""
    family = os.environ.get("KERNEL_FAMILY", "*")
    seen: dict[str, int] = {}
    for source in sorted((ROOT / "kernels").glob(f"{family}.cu")):
        rc, log, cubin = nvrtc_compile(nvrtc, source.stem, "sm_90", env_defines(), ROOT)
        if rc:
            print(f"{source.stem}: compile failed\n{log[:2000]}")
            return 1
        for kernel, segments in sorted(rounds(sass_of(cubin, tools)).items()):
            seen[kernel] = max((first_run(t) for t in segments), default=0)
            if only in kernel:
                for text in segments:
                    print(f"{source.stem:17} {kernel:40} {text[:200]}")
    short = {k: seen.get(k) for k, n in expect.items() if seen.get(k, 0) < n}
    for kernel, got in short.items():
        print(f"{kernel}: at most {got} loads before a first wait, {expect[kernel]} expected")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
