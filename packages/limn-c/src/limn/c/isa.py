"""The ISA table: what the target's vector unit is, and the kernel shapes chosen for it.

The c device asks its compiler, with the flags it builds kernels with, which macros it predefines
(`cc -march=native -dM -E`: `__AVX512F__`, `__AVX2__`, `__FMA__`, `__ARM_NEON`, ...), and picks the
first row of TABLE whose macros are all there. A row holds the vector width and register count, and
from them the sizes the rewrites use: the matmul tile (rewrites/matmul), the chunk of a chunked fold
(rewrites/chunk) and the jam factor of a jammed fold (rewrites/jam). None of these changes a bit of any result:
they only decide how many independent cells are in flight at once.

A matmul tile holds rows x vectors accumulators in registers, plus one vector of b per column
vector and one broadcast value of a, so rows * vectors + vectors + 1 must fit in the registers.
Pipeline: IR -> C source (**shaped by this table**) -> cc.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class ISA:
    """One target's vector unit and the kernel shapes that suit it."""

    name: str
    requires: tuple[str, ...]  # macros the compiler must predefine for this row
    vector_bytes: int  # bytes in one vector register
    registers: int  # vector registers the compiler can allocate
    fma: bool  # a fused multiply-add instruction exists (fmaf is one instruction, not a libm call)
    tile_rows: int  # matmul tile: rows of output cells
    tile_vectors: int  # matmul tile: vectors of output columns per row
    chunk_bytes: int  # bytes of values a chunked fold makes ahead of folding them
    jam: int  # cells of a row fold computed side by side

    def __post_init__(self) -> None:
        live = self.tile_rows * self.tile_vectors + self.tile_vectors + 1
        if live > self.registers:
            raise ValueError(f"ISA {self.name}: a {self.tile_rows} x {self.tile_vectors} tile needs {live} registers")

    def describe(self) -> str:
        """One line for LIMN_DEBUG: the row's name and the shapes it chose."""
        fma = "fma" if self.fma else "no fma"
        return (
            f"{self.name}: {self.vector_bytes}-byte vectors, {self.registers} registers, {fma}; "
            f"matmul tile {self.tile_rows} x {self.tile_vectors} vectors, chunk {self.chunk_bytes} bytes, "
            f"jam {self.jam}"
        )


# First match wins, so wider units come first. Tile shapes: 8 x 2 zmm leaves AVX-512 room to spare
# (19 of 32 registers) while 6 x 2 ymm is the widest tile that fits AVX2's 16 (15 of them).
TABLE: tuple[ISA, ...] = (
    ISA("x86-64-v4 (AVX-512)", ("__AVX512F__", "__FMA__"), 64, 32, True, 8, 2, 64, 8),
    ISA("x86-64-v3 (AVX2 + FMA)", ("__AVX2__", "__FMA__"), 32, 16, True, 6, 2, 64, 8),
    ISA("aarch64 (NEON)", ("__ARM_NEON",), 16, 32, True, 8, 2, 64, 8),
    ISA("x86-64 (SSE2)", ("__SSE2__",), 16, 16, False, 6, 2, 64, 8),
    ISA("scalar", (), 16, 16, False, 6, 2, 64, 8),
)

BY_NAME = {isa.name.split(" ")[0]: isa for isa in TABLE}  # "x86-64-v3", "aarch64", "scalar", ...


def choose(macros: set[str]) -> tuple[ISA, str]:
    """The first row whose macros are all predefined, and why it was chosen."""
    for isa in TABLE:
        if all(m in macros for m in isa.requires):
            found = ", ".join(isa.requires) if isa.requires else "no vector macro matched"
            return isa, f"the compiler predefines {found}"
    raise AssertionError("the scalar row requires nothing")  # pragma: no cover


def predefined_macros(cc: str, flags: list[str]) -> tuple[set[str], str]:
    """The macro names `cc flags -dM -E` predefines, and an error message if the compiler would not say
    (then the set is empty and the scalar row is chosen)."""
    cmd = [cc, *[f for f in flags if f.startswith(("-m", "-f", "-O", "-std"))], "-dM", "-E", "-x", "c", "-"]
    try:
        done = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return set(), f"{' '.join(cmd)} failed: {e}"
    if done.returncode != 0:
        return set(), f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[:200]}"
    names = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("#define ")}
    return names, ""


def probe(cc: str, flags: list[str]) -> tuple[ISA, str]:
    """The row for what `cc` builds with `flags`, and why (for LIMN_DEBUG=1)."""
    macros, error = predefined_macros(cc, flags)
    isa, why = choose(macros)
    return isa, f"{why} ({error})" if error else why
