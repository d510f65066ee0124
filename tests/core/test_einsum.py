"""einsum against torch, forward and backward, on the numpy device and on c: matmuls, batches, outer
products, traces and diagonals (a repeated letter), `...`, implicit outputs, three operands, zero-size dims,
and the rule that "ij,jk->ik" builds the very graph (and kernels) that a @ b builds.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import Table, case

from limn import Tensor
from limn.compiler.schedule import schedule
from limn.graph.ops import toposort

RNG = np.random.default_rng(2)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4, 5)).astype(np.float32)
C = RNG.standard_normal((2, 3, 4)).astype(np.float32)
D = RNG.standard_normal((2, 4, 5)).astype(np.float32)
SQ = RNG.standard_normal((4, 4)).astype(np.float32)
BSQ = RNG.standard_normal((2, 3, 3)).astype(np.float32)
V = RNG.standard_normal(4).astype(np.float32)
W = RNG.standard_normal(5).astype(np.float32)
E = np.zeros((0, 4), np.float32)
I = np.arange(12, dtype=np.int32).reshape(3, 4)  # noqa: E741


def ein(equation: str, *names: str, **inputs: np.ndarray):
    args = ", ".join(names)
    return case(f"Tensor.einsum({equation!r}, {args})", f"torch.einsum({equation!r}, {args})", **inputs)


EINSUM = Table(
    [
        ein("ij,jk->ik", "a", "b", a=A, b=B, id="matmul"),
        ein("ij,jk", "a", "b", a=A, b=B, id="matmul_implicit_output"),
        ein("ij,kj->ik", "a", "b", a=A, b=B.T.copy(), id="matmul_transposed_operand"),
        ein("ij,jk->ki", "a", "b", a=A, b=B, id="matmul_transposed_output"),
        ein("bij,bjk->bik", "c", "d", c=C, d=D, id="batched_matmul"),
        ein("bij,jk->bik", "c", "b", c=C, b=B, id="batch_on_one_side"),
        ein("...ij,...jk->...ik", "c", "d", c=C, d=D, id="ellipsis_batch"),
        ein("...ij,jk", "c", "b", c=C, b=B, id="ellipsis_implicit"),
        ein("i...->...", "c", c=C, id="ellipsis_sum_leading"),
        ein("...i,...i->...", "c", "e", c=C, e=C[0], id="ellipsis_broadcasts"),
        ein("i,j->ij", "v", "w", v=V, w=W, id="outer_product"),
        ein("i,i->", "v", "u", v=V, u=V[::-1].copy(), id="dot"),
        ein("ij,ij->ij", "a", "e", a=A, e=A[::-1].copy(), id="elementwise"),
        ein("ij,ij->", "a", "e", a=A, e=A[::-1].copy(), id="frobenius"),
        ein("ij->ji", "a", a=A, id="transpose"),
        ein("ij->", "a", a=A, id="sum_all"),
        ein("ij->j", "a", a=A, id="sum_rows"),
        ein("ii->i", "s", s=SQ, id="diagonal"),
        ein("ii", "s", s=SQ, id="trace_implicit"),
        ein("ii->", "s", s=SQ, id="trace"),
        ein("bii->bi", "s", s=BSQ, id="batched_diagonal"),
        ein("bii->b", "s", s=BSQ, id="batched_trace"),
        ein("ij,jk,kl->il", "a", "b", "f", a=A, b=B, f=B.T.copy(), id="three_operands"),
        ein("ij,jk,k->i", "a", "b", "w", a=A, b=B, w=W, id="matrix_vector_chain"),
        ein("ij,j->i", "a", "v", a=A, v=V, id="matrix_vector"),
        ein("ik,jk->ijk", "a", "e", a=A, e=A[::-1].copy(), id="letter_kept_in_both"),
        ein("i j , j k -> i k", "a", "b", a=A, b=B, id="spaces"),
        ein("ij,jk->ik", "a", "b", a=E, b=B, id="zero_size_rows"),
        ein("ij,jk->ik", "a", "b", a=A[:, :0].copy(), b=B[:0].copy(), id="zero_size_contraction"),
        ein("ij,jk->ik", "a", "b", a=I, b=I.T.copy(), id="int32"),
        ein("ij,jk->ik", "a", "b", a=A.astype(np.float64), b=B.astype(np.float64), id="float64"),
        ein("ij,j->ij", "a", "v", a=A, v=np.ones(1, np.float32), id="size_one_broadcasts"),
    ]
)


@pytest.mark.parametrize("name", EINSUM.ids)
def test_einsum_matches_torch(device: str, name: str) -> None:
    EINSUM.assert_agrees(device, name)


def ops(t: Tensor) -> list[str]:
    return [f"{n.op.name}{list(n.shape)}" for n in toposort([t.node])]


@pytest.mark.parametrize(
    ("equation", "hand_written"),
    [
        ("ij,jk->ik", lambda a, b: a @ b),
        ("ij,jk", lambda a, b: a @ b),
    ],
)
def test_einsum_matmul_builds_the_graph_and_kernels_of_the_matmul(equation: str, hand_written) -> None:
    a, b = Tensor(A), Tensor(B)
    mine, theirs = Tensor.einsum(equation, a, b), hand_written(a, b)
    assert ops(mine) == ops(theirs), f"einsum({equation!r}) builds {ops(mine)}, a @ b {ops(theirs)}"
    assert len(schedule([mine.node]).kernels) == len(schedule([theirs.node]).kernels)


def test_batched_einsum_is_one_matmul_kernel_as_the_batched_matmul() -> None:
    c, d = Tensor(C), Tensor(D)
    mine, theirs = Tensor.einsum("bij,bjk->bik", c, d), c @ d
    assert len(schedule([mine.node]).kernels) == len(schedule([theirs.node]).kernels)


def test_einsum_takes_its_operands_as_one_list_too() -> None:
    out = Tensor.einsum("ij,jk->ik", [Tensor(A), Tensor(B)])
    np.testing.assert_allclose(out.numpy(), A @ B, rtol=1e-5, atol=1e-5)


MISTAKES = {
    "operand_count": (lambda: Tensor.einsum("ij,jk->ik", Tensor(A)), "names 2 operands, 1 were given"),
    "rank": (lambda: Tensor.einsum("ijk->i", Tensor(A)), "names 3 dims, the operand has shape"),
    "sizes": (lambda: Tensor.einsum("ij,jk->ik", Tensor(A), Tensor(A)), "letter 'j' names dims of sizes 4 and 3"),
    "unknown_output_letter": (lambda: Tensor.einsum("ij->k", Tensor(A)), "output letter 'k' names no input dim"),
    "repeated_output_letter": (lambda: Tensor.einsum("ij->ii", Tensor(A)), "output letter 'i' appears twice"),
    "bad_character": (lambda: Tensor.einsum("i1->i", Tensor(A)), "something other than letters"),
    "diagonal_sizes": (lambda: Tensor.einsum("ii->i", Tensor(A)), "names two dims of sizes"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_an_einsum_mistake_raises_value_error(mistake: str) -> None:
    action, message = MISTAKES[mistake]
    with pytest.raises(ValueError, match=message):
        action()
