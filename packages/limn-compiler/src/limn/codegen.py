"""The compiler's printout by its public name: `from limn.codegen import ir` prints the loop nests a graph
lowers to (limn.compiler.codegen does the lowering; this module only names it where users reach for it)."""

from limn.compiler.codegen import ir, lower

__all__ = ["ir", "lower"]
