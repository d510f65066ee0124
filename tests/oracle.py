"""The torch oracle for op tests: an expression run in limn and in torch from the same inputs, its values and
the gradients of its sum compared, and a standalone reproducer printed when they differ.

`agree` checks one expression. `Table` checks a family of them (one Case per row) in one realize and one
backward per device, so on the c device a whole table is one compiled library rather than one per row, and
each row still reports as its own test. Values match NaN for NaN and inf for inf; with signed_zeros the signs
of zeros must match too.
The `device` fixture (tests/conftest.py) runs a test on numpy and on c.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import limn
from limn import Tensor

TOLERANCE = 1e-5


def literal(a: np.ndarray) -> str:
    """A numpy array as python source that runs (nan and inf spelled out)."""
    body = repr(a.tolist()).replace("nan", "float('nan')").replace("inf", "float('inf')")
    return f"np.array({body}, np.{a.dtype})"


@dataclass(frozen=True)
class Case:
    """One row of an op table: limn_expr over named numpy inputs, and its torch spelling (the same text by
    default). grad compares the gradients of out.sum() for every float input; torch_float64 runs torch in
    float64 and rounds to the inputs' dtype (the oracle where torch's own float32 arithmetic overflows)."""

    limn_expr: str
    torch_expr: str | None = None
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    grad: bool = True
    signed_zeros: bool = False
    tol: float = TOLERANCE
    torch_float64: bool = False
    id: str | None = None  # the test id; the limn expression when None

    @property
    def name(self) -> str:
        return self.id or self.limn_expr

    @property
    def theirs(self) -> str:
        return self.torch_expr or self.limn_expr

    def floats(self) -> list[str]:
        return [k for k, v in self.inputs.items() if v.dtype.kind == "f"]


def case(limn_expr: str, torch_expr: str | None = None, **options: Any) -> Case:
    """A Case whose keyword arguments are its inputs, except Case's own options; a list input becomes float32."""
    own = {k: options.pop(k) for k in ("grad", "signed_zeros", "tol", "torch_float64", "id") if k in options}
    inputs = {k: v if isinstance(v, np.ndarray) else np.array(v, np.float32) for k, v in options.items()}
    return Case(limn_expr, torch_expr, inputs, **own)


def reproducer(device: str, c: Case) -> str:
    """Standalone python that runs the case in limn and in torch and prints both."""
    lines = ["import math", "import numpy as np", "import torch", "import limn", "from limn import Tensor", ""]
    lines += [f"limn.set_device({device!r})"]
    for name, a in c.inputs.items():
        lines.append(f"{name} = Tensor({literal(a)}, requires_grad={c.grad and a.dtype.kind == 'f'})")
    lines += [f"out = {c.limn_expr}", "print(out.numpy())"]
    if c.grad:
        lines += ["out.sum().backward()"] + [f"print({n}.grad.numpy())" for n in c.floats()]
    lines.append("")
    for name, a in c.inputs.items():
        lines.append(f"{name} = torch.tensor({literal(a)}, requires_grad={c.grad and a.dtype.kind == 'f'})")
    lines += [f"out = {c.theirs}", "print(out)"]
    if c.grad:
        lines += ["out.sum().backward()"] + [f"print({n}.grad)" for n in c.floats()]
    if c.torch_float64:
        lines.append("# (torch ran in float64)")
    return "\n".join(lines)


def same(
    got: np.ndarray, want: np.ndarray, what: str, signed_zeros: bool = False, tol: float = TOLERANCE
) -> str | None:
    """None when got matches want: shape, dtype family, values (NaN for NaN, inf for inf), zero signs if asked."""
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, torch {want.shape}"
    if got.dtype.kind != want.dtype.kind or (got.dtype.kind == "f" and got.dtype != want.dtype):
        return f"{what}: dtype {got.dtype}, torch {want.dtype}"
    if got.dtype.kind != "f":
        return None if np.array_equal(got, want) else f"{what}: {got.tolist()}, torch {want.tolist()}"
    try:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    except AssertionError:
        return f"{what}: {got.tolist()}, torch {want.tolist()}"
    zeros = (got == 0) & (want == 0)
    if signed_zeros and not np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])):
        return f"{what}: signs of zeros differ: {got.tolist()}, torch {want.tolist()}"
    return None


@dataclass
class _Run:
    """One case's limn side: its input tensors and output, or the error building them raised."""

    ours: dict[str, Tensor]
    out: Tensor | None
    error: str | None


def _build(c: Case) -> _Run:
    floats = c.floats()
    ours = {k: Tensor(v, requires_grad=c.grad and k in floats) for k, v in c.inputs.items()}
    try:
        out = eval(c.limn_expr, {"Tensor": Tensor, "limn": limn, "math": math, "np": np, **ours})
    except Exception as e:  # the row reports it; the other rows still run
        return _Run(ours, None, f"limn raised {type(e).__name__}: {e}")
    return _Run(ours, out, None)


def _torch_side(c: Case) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    floats = c.floats()
    wide = {k: v.astype(np.float64) if c.torch_float64 and k in floats else v for k, v in c.inputs.items()}
    theirs = {k: torch.tensor(v, requires_grad=c.grad and k in floats) for k, v in wide.items()}
    tout = eval(c.theirs, {"torch": torch, "math": math, "np": np, **theirs})
    if c.grad and tout.requires_grad:
        tout.sum().backward()
    return tout, theirs


def _compare(c: Case, run: _Run) -> list[str]:
    """The differences between the case's realized limn run and torch (gradients already taken on both)."""
    try:
        tout, theirs = _torch_side(c)
    except Exception as e:
        return [f"torch raised {type(e).__name__}: {e} (a case where both raise belongs in a pytest.raises test)"]

    def rounded(t: torch.Tensor, like: np.ndarray) -> np.ndarray:
        a = t.detach().numpy()
        return a.astype(like.dtype) if c.torch_float64 and a.dtype == np.float64 else a

    got = run.out.numpy()
    problems = [same(got, rounded(tout, got), "value", c.signed_zeros, c.tol)]
    if c.grad:
        for k in c.floats():
            mine, want = run.ours[k].grad, theirs[k].grad
            if mine is None or want is None:
                if mine is not None or want is not None:
                    problems.append(f"d/d{k}: limn {mine}, torch {want} (one of them is cut off from {k})")
                continue
            problems.append(same(mine.numpy(), rounded(want, c.inputs[k]), f"d/d{k}", c.signed_zeros, c.tol))
    return [p for p in problems if p]


def _backward(runs: Sequence[_Run], cases: Sequence[Case]) -> None:
    """One backward for every row: the rows share no inputs, so each input's gradient is its own row's."""
    terms = [r.out.sum().cast("float32") for r, c in zip(runs, cases) if c.grad and r.out.requires_grad]
    if terms:
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        total.backward()


def check(device: str, cases: Sequence[Case]) -> dict[str, str | None]:
    """Each case's failure (its problems and reproducer) or None, from one realize and one backward of all of
    them; if the batch itself fails, each case runs alone so the failure lands on its own row."""
    runs = [_build(c) for c in cases]
    good = [(r, c) for r, c in zip(runs, cases) if r.out is not None]
    try:
        _backward([r for r, _ in good], [c for _, c in good])
        grads = [t.grad for r, _ in good for t in r.ours.values() if t.grad is not None]
        limn.realize(*[r.out for r, _ in good], *grads)
    except Exception:
        if len(cases) > 1:
            results: dict[str, str | None] = {}
            for c in cases:
                results.update(check(device, [c]))
            return results
        raise
    results = {}
    for r, c in zip(runs, cases):
        problems = [r.error] if r.error else _compare(c, r)
        results[c.name] = (
            None
            if not problems
            else (
                f"{c.limn_expr} on {device}: "
                + "; ".join(problems)
                + f"\n\n---- reproducer ----\n{reproducer(device, c)}"
            )
        )
    return results


def agree(
    device: str,
    limn_expr: str,
    torch_expr: str | None = None,
    *,
    grad: bool = True,
    signed_zeros: bool = False,
    tol: float = TOLERANCE,
    torch_float64: bool = False,
    **inputs: np.ndarray,
) -> None:
    """Asserts limn_expr and torch_expr (default: the same text) agree on `inputs`, values and, with grad, the
    gradients of out.sum() w.r.t. each float input. A list input becomes float32."""
    options = {"grad": grad, "signed_zeros": signed_zeros, "tol": tol, "torch_float64": torch_float64}
    c = case(limn_expr, torch_expr, **options, **inputs)
    problem = check(device, [c])[c.name]
    assert problem is None, problem


class Table:
    """A family of cases checked together per device (one realize, one backward), each reported as its own
    test: parametrize over `table.ids` and call `table.assert_agrees(device, id)`."""

    def __init__(self, cases: Sequence[Case]) -> None:
        self.cases = list(cases)
        names = [c.name for c in self.cases]
        duplicates = {n for n in names if names.count(n) > 1}
        assert not duplicates, f"two cases share the id {sorted(duplicates)}; give them id=..."
        self.ids = names
        self._results: dict[str, dict[str, str | None]] = {}

    def assert_agrees(self, device: str, name: str) -> None:
        if device not in self._results:
            self._results[device] = check(device, self.cases)
        problem = self._results[device][name]
        assert problem is None, problem
