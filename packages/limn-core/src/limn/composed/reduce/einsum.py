"""einsum: an equation over index letters read as permutes, diagonals, expands, a multiply and a sum.

einsum takes torch's equation ("ij,jk->ik", with `...`, repeated letters and an implicit output) and its
operands, and gives a tensor built from Tensor methods: a repeated letter within an operand is a diagonal,
a letter only one operand has and the output lacks is summed first, two operands are one matmul (so
"ij,jk->ik" builds the very graph a @ b does), and any other count is a broadcast product and a sum.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.errors import ArgumentError
from limn.graph.view import prod

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

ELLIPSIS_LETTERS = "0123456789"  # stand-ins for the dims `...` covers (digits cannot be index letters)


@dataclass
class Term:
    """One operand with a letter naming each of its dims (no letter twice once diagonals are taken)."""

    tensor: Tensor
    letters: str


class EinsumMixin:
    """Tensor.einsum, torch's."""

    __slots__ = ()

    @staticmethod
    def einsum(equation: str, *operands: Tensor | Sequence[Tensor]) -> Tensor:
        """The sum over the letters the output lacks of the product of the operands, as torch.einsum.

        Letters name dims ("bij,bjk->bik" is a batched matmul); a letter repeated in one operand takes that
        operand's diagonal ("ii->i"); `...` stands for the dims no letter names, broadcast across operands;
        without "->" the output is the `...` dims then the letters used once, in alphabetical order.

        >>> Tensor.einsum("ij,jk->ik", Tensor([[1, 2]]), Tensor([[3], [4]])).tolist()
        [[11]]
        """
        if len(operands) == 1 and not isinstance(operands[0], limn.Tensor):
            operands = tuple(operands[0])
        inputs, output = _parse(equation, len(operands))
        n_ellipsis = max((t.ndim - (len(s) - 3) for s, t in zip(inputs, operands) if "..." in s), default=0)
        terms = [_term(t, s, n_ellipsis, equation) for s, t in zip(inputs, operands)]
        if output is None:
            counts = "".join(inputs).replace("...", "")  # once in the whole equation ("ii" is a trace)
            named = sorted({c for c in counts if counts.count(c) == 1})
            output = ELLIPSIS_LETTERS[:n_ellipsis] + "".join(named)
        else:
            output = output.replace("...", ELLIPSIS_LETTERS[:n_ellipsis])
            _check_output(output, terms, equation)
        sizes = _sizes(terms, equation)
        terms = [_sum_own(t, terms, output) for t in terms]
        if len(terms) == 2:
            return _pair(terms[0], terms[1], output, sizes)
        return _product(terms, output, sizes)


def _parse(equation: str, n: int) -> tuple[list[str], str | None]:
    eq = equation.replace(" ", "")
    left, arrow, right = eq.partition("->")
    inputs = left.split(",")
    if len(inputs) != n:
        raise ArgumentError(f"einsum: {equation!r} names {len(inputs)} operands, {n} were given")
    for s in [*inputs, right]:
        letters = s.replace("...", "")
        if "." in letters or not all(c.isalpha() for c in letters):
            raise ArgumentError(f"einsum: {equation!r}: a term holds something other than letters and `...`: {s!r}")
        if s.count("...") > 1:
            raise ArgumentError(f"einsum: {equation!r}: a term holds `...` more than once: {s!r}")
    return inputs, (right if arrow else None)


def _term(t: Tensor, spec: str, n_ellipsis: int, equation: str) -> Term:
    """The operand with its letters, `...` spelled out (right-aligned) and repeated letters as diagonals."""
    if "..." in spec:
        own = t.ndim - (len(spec) - 3)
        if own < 0:
            raise ArgumentError(f"einsum: {equation!r}: operand of shape {t.shape} has fewer dims than {spec!r} names")
        spec = spec.replace("...", ELLIPSIS_LETTERS[n_ellipsis - own : n_ellipsis])
    if len(spec) != t.ndim:
        raise ArgumentError(f"einsum: {equation!r}: {spec!r} names {len(spec)} dims, the operand has shape {t.shape}")
    while len(set(spec)) < len(spec):  # "ii": the diagonal over the two dims, appended as the last dim
        c = next(c for c in spec if spec.count(c) > 1)
        first, second = spec.index(c), spec.index(c, spec.index(c) + 1)
        if t.shape[first] != t.shape[second]:
            sizes = (t.shape[first], t.shape[second])
            raise ArgumentError(f"einsum: {equation!r}: letter {c!r} names two dims of sizes {sizes}")
        t = t.diagonal(0, first, second)
        spec = spec[:first] + spec[first + 1 : second] + spec[second + 1 :] + c
    return Term(t, spec)


def _check_output(output: str, terms: list[Term], equation: str) -> None:
    used = set("".join(t.letters for t in terms))
    for c in output:
        if c not in used:
            raise ArgumentError(f"einsum: {equation!r}: output letter {c!r} names no input dim")
        if output.count(c) > 1:
            raise ArgumentError(f"einsum: {equation!r}: output letter {c!r} appears twice")


def _sizes(terms: list[Term], equation: str) -> dict[str, int]:
    """The size of each letter; a size-1 dim broadcasts, any other mismatch is an error."""
    sizes: dict[str, int] = {}
    for t in terms:
        for c, s in zip(t.letters, t.tensor.shape):
            if sizes.get(c, 1) != 1 and s != 1 and sizes[c] != s:
                raise ArgumentError(f"einsum: {equation!r}: letter {c!r} names dims of sizes {sizes[c]} and {s}")
            sizes[c] = s if sizes.get(c, 1) == 1 else sizes[c]
    return sizes


def _sum_own(term: Term, terms: list[Term], output: str) -> Term:
    """The term with the letters only it has, and the output lacks, summed out."""
    others = "".join(t.letters for t in terms if t is not term)
    own = [d for d, c in enumerate(term.letters) if c not in output and c not in others]
    if not own:
        return term
    return Term(term.tensor.sum(tuple(own)), "".join(c for d, c in enumerate(term.letters) if d not in own))


def _arranged(term: Term, order: str) -> Tensor:
    """The term's tensor with its dims in `order`, a size-1 dim for each letter it lacks."""
    kept = [c for c in order if c in term.letters]
    t = term.tensor.permute(tuple(term.letters.index(c) for c in kept))
    return t.reshape(tuple(term.tensor.shape[term.letters.index(c)] if c in term.letters else 1 for c in order))


def _pair(a: Term, b: Term, output: str, sizes: dict[str, int]) -> Tensor:
    """Two operands as one matmul: (batch..., left, contracted) @ (batch..., contracted, right)."""
    batch = [c for c in output if c in a.letters and c in b.letters]
    left = [c for c in output if c in a.letters and c not in b.letters]
    right = [c for c in output if c in b.letters and c not in a.letters]
    summed = [c for c in a.letters if c in b.letters and c not in output]
    x = _arranged(a, "".join(batch + left + summed))  # (batch..., left..., summed...)
    y = _arranged(b, "".join(batch + summed + right))  # (batch..., summed..., right...)
    nb = len(batch)
    contracted = tuple(sizes[c] for c in summed)
    x = x.expand(x.shape[:nb] + x.shape[nb : nb + len(left)] + contracted)  # a size-1 summed dim broadcasts
    y = y.expand(y.shape[:nb] + contracted + y.shape[nb + len(summed) :])
    m, k, n = prod(x.shape[nb : nb + len(left)]), prod(contracted), prod(y.shape[nb + len(summed) :])
    out = x.reshape(x.shape[:nb] + (m, k)) @ y.reshape(y.shape[:nb] + (k, n))  # (batch..., m, n)
    batch_shape = out.shape[:nb]
    out = out.reshape(batch_shape + x.shape[nb : nb + len(left)] + y.shape[nb + len(summed) :])
    have = batch + left + right  # the dims of out, in order
    return out.permute(tuple(have.index(c) for c in output))


def _product(terms: list[Term], output: str, sizes: dict[str, int]) -> Tensor:
    """Any number of operands: each arranged over every letter (output first), multiplied, and summed over
    the letters the output lacks."""
    letters = output + "".join(sorted({c for t in terms for c in t.letters if c not in output}))
    out = None
    for t in terms:
        x = _arranged(t, letters)
        out = x if out is None else out * x
    summed = tuple(range(len(output), len(letters)))
    if summed:
        out = out.sum(summed)
    full = tuple(sizes[c] for c in output)
    return out.expand(full) if out.shape != full else out
