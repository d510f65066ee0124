"""The autograd fuzzer: 300 random DAGs (100 more with limn's composed ops, and 60 more with the ops that pick
elements: sort, topk, advanced indexing, pools) run forward and backward in limn and in torch, agreeing to 1e-4.

A case is a small program, a list of Steps generated from its seed. Each Step is one line of python spelled
once for limn and once for torch (SPELLINGS, one row per op), and the test runs exactly those lines, so the
reproducer a failure prints is the code that failed, standalone. The generator runs each step in torch as it
builds the program and keeps only steps whose inputs sit clear of kinks and ties (relu and abs away from 0,
max and min with one clear winner, log and sqrt on positive values), where a rounding difference between two
correct frameworks could flip a gradient.

A fraction of the leaves carry special values (NaN, inf, -inf, -0.0), so comparisons, reductions and the
rules above meet them at random: those are exact in both frameworks, so the kink and tie checks look only at
the finite values, and a value or gradient that is NaN or inf in torch must be NaN or inf in limn too. A step
may turn non-finite only by propagating a special value: one that overflows from finite inputs is dropped.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

import limn
from limn import Tensor, autograd
from limn.graph.ops import Movement, Op, toposort

CASES = 300
# Cases from seed COMPOSED_FROM on also draw the compositions of limn.composed.functional.activations,
# limn.composed.math.trig, limn.composed.math.logexp, limn.composed.reduce.scans, limn.composed.movement.rearrange and
# limn.composed.movement.triangles, over finite leaves only: their NaN and inf rules are the tables' named rows
# (tests/core/test_activations.py, test_math_functions.py, test_scans.py, ...), and a second set keeps the first 300
# cases exactly as they were, so a new op changes no old case.
COMPOSED_FROM, COMPOSED_CASES = 1000, 100
# Cases from seed SELECTING_FROM on draw, beside all of that, the ops that pick elements: sort and topk,
# advanced indexing with an int tensor or a bool mask, and the 2-d pools (limn.composed.reduce.sorting,
# limn.composed.indexed.indexing, limn.composed.functional.pooling). Their gradients go where the forward picked, so a
# tie would make the gradient a rounding's choice: the generator keeps only values with no two within MARGIN where it
# matters.
SELECTING_FROM, SELECTING_CASES = 2000, 60
SEEDS = [
    *range(CASES),
    *range(COMPOSED_FROM, COMPOSED_FROM + COMPOSED_CASES),
    *range(SELECTING_FROM, SELECTING_FROM + SELECTING_CASES),
]
TOLERANCE = 1e-4  # relative and absolute, for every value and every gradient
MARGIN = 1e-2  # how far a value must sit from a kink or a tie; rounding differences are near 1e-6
BOUND = 30.0  # steps whose values grow past this are dropped, keeping float32 error near 1e-6 of them
MAX_SIZE = 720  # elements per value, so a case stays a few milliseconds of numpy
SPECIAL_LEAVES = 0.2  # the fraction of leaves that carry special values
SPECIALS = (math.nan, math.inf, -math.inf, -0.0)

# op: (limn spelling, torch spelling). {0}, {1}, ... name the srcs; the other fields are the step's args.
SPELLINGS: dict[str, tuple[str, str]] = {
    # sources: x{out} is the numpy array the case holds for this step
    "leaf": ("Tensor(x{out}, requires_grad=True)", "torch.tensor(x{out}, requires_grad=True)"),
    "data": ("Tensor(x{out})", "torch.tensor(x{out})"),
    "index": ("Tensor(x{out})", "torch.tensor(x{out}).long()"),
    "mask": ("Tensor(x{out})", "torch.tensor(x{out})"),
    # movement
    "reshape": ("{0}.reshape({shape})", "{0}.reshape({shape})"),
    "permute": ("{0}.permute({order})", "{0}.permute({order})"),
    "transpose": ("{0}.transpose({a}, {b})", "{0}.transpose({a}, {b})"),
    "expand": ("{0}.expand({shape})", "{0}.expand({shape})"),
    "pad": ("{0}.pad({widths}, value={value})", "torch.nn.functional.pad({0}, {flat}, value={value})"),
    "shrink": ("{0}.shrink({box})", "{0}[{slices}]"),
    "index_with": ("{0}[{index}]", "{0}[{index}]"),
    "flatten": ("{0}.flatten({start}, {end})", "{0}.flatten({start}, {end})"),
    "squeeze": ("{0}.squeeze({axis})", "{0}.squeeze({axis})"),
    "unsqueeze": ("{0}.unsqueeze({axis})", "{0}.unsqueeze({axis})"),
    "cat": ("Tensor.cat([{0}, {1}], {axis})", "torch.cat([{0}, {1}], {axis})"),
    "stack": ("Tensor.stack([{0}, {1}], {axis})", "torch.stack([{0}, {1}], {axis})"),
    "split": ("{0}.split({sizes}, {axis})[{i}]", "{0}.split({sizes}, {axis})[{i}]"),
    "chunk": ("{0}.chunk({n}, {axis})[{i}]", "{0}.chunk({n}, {axis})[{i}]"),
    "contiguous": ("{0}.contiguous()", "{0}.contiguous()"),
    # elementwise
    "neg": ("-{0}", "-{0}"),
    "exp": ("{0}.exp()", "{0}.exp()"),
    "log": ("{0}.log()", "{0}.log()"),
    "sqrt": ("{0}.sqrt()", "{0}.sqrt()"),
    "relu": ("{0}.relu()", "{0}.relu()"),
    "sigmoid": ("{0}.sigmoid()", "{0}.sigmoid()"),
    "tanh": ("{0}.tanh()", "{0}.tanh()"),
    "gelu": ("{0}.gelu()", "torch.nn.functional.gelu({0})"),
    "abs": ("{0}.abs()", "{0}.abs()"),
    "sin": ("{0}.sin()", "{0}.sin()"),
    "cos": ("{0}.cos()", "{0}.cos()"),
    "atan": ("{0}.atan()", "{0}.atan()"),
    "asinh": ("{0}.asinh()", "{0}.asinh()"),
    "expm1": ("{0}.expm1()", "{0}.expm1()"),
    "log1p": ("{0}.log1p()", "{0}.log1p()"),
    "softplus": ("{0}.softplus()", "torch.nn.functional.softplus({0})"),
    "mish": ("{0}.mish()", "torch.nn.functional.mish({0})"),
    "logsigmoid": ("{0}.logsigmoid()", "torch.nn.functional.logsigmoid({0})"),
    "elu": ("{0}.elu()", "torch.nn.functional.elu({0})"),
    "leaky_relu": ("{0}.leaky_relu(0.1)", "torch.nn.functional.leaky_relu({0}, 0.1)"),
    "add": ("{0} + {1}", "{0} + {1}"),
    "sub": ("{0} - {1}", "{0} - {1}"),
    "mul": ("{0} * {1}", "{0} * {1}"),
    "div": ("{0} / {1}", "{0} / {1}"),
    "maximum": ("{0}.maximum({1})", "torch.maximum({0}, {1})"),
    "minimum": ("{0}.minimum({1})", "torch.minimum({0}, {1})"),
    "scale": ("{0} * {c}", "{0} * {c}"),
    "shift": ("{0} + {c}", "{0} + {c}"),
    "rsub": ("{c} - {0}", "{c} - {0}"),
    "rdiv": ("{c} / {0}", "{c} / {0}"),
    "pow": ("{0} ** {p}", "{0} ** {p}"),
    "where": ("({0} > {t}).where({1}, {2})", "torch.where({0} > {t}, {1}, {2})"),
    "to_float64": ("{0}.cast('float64')", "{0}.to(torch.float64)"),
    "to_float32": ("{0}.cast('float32')", "{0}.to(torch.float32)"),
    # reductions
    "sum": ("{0}.sum(axis={axis}, keepdim={keepdim})", "{0}.sum(dim={dim}, keepdim={keepdim})"),
    "mean": ("{0}.mean(axis={axis}, keepdim={keepdim})", "{0}.mean(dim={dim}, keepdim={keepdim})"),
    "max": ("{0}.max(axis={axis}, keepdim={keepdim})", "{0}.amax(dim={dim}, keepdim={keepdim})"),
    "min": ("{0}.min(axis={axis}, keepdim={keepdim})", "{0}.amin(dim={dim}, keepdim={keepdim})"),
    "var": (
        "{0}.var(axis={axis}, keepdim={keepdim}, correction={correction})",
        "{0}.var(dim={dim}, keepdim={keepdim}, correction={correction})",
    ),
    "logsumexp": (
        "{0}.logsumexp(axis={axis}, keepdim={keepdim})",
        "torch.logsumexp({0}, dim={dim}, keepdim={keepdim})",
    ),
    "softmax": ("{0}.softmax({axis})", "{0}.softmax({axis})"),
    "cumsum": ("{0}.cumsum({axis})", "{0}.cumsum({axis})"),
    "cumprod": ("{0}.cumprod({axis})", "{0}.cumprod({axis})"),
    "logcumsumexp": ("{0}.logcumsumexp({axis})", "{0}.logcumsumexp({axis})"),
    "flip": ("{0}.flip({dims})", "{0}.flip({dims})"),
    "roll": ("{0}.roll({shifts}, {dims})", "{0}.roll({shifts}, {dims})"),
    "tril": ("{0}.tril({k})", "{0}.tril({k})"),
    "log_softmax": ("{0}.log_softmax({axis})", "{0}.log_softmax({axis})"),
    # matmul and the indexed ops
    "matmul": ("{0} @ {1}", "{0} @ {1}"),
    "gather": ("{0}.gather({axis}, {1})", "{0}.gather({axis}, {1})"),
    "scatter_add": ("{0}.scatter_add({axis}, {1}, {2})", "{0}.scatter_add({axis}, {1}, {2})"),
    # the ops that pick elements
    "sort": ("{0}.sort({axis}, descending={descending})[0]", "{0}.sort({axis}, descending={descending})[0]"),
    "topk": ("{0}.topk({k}, {axis}, largest={largest})[0]", "{0}.topk({k}, {axis}, largest={largest})[0]"),
    "take": ("{0}[{1}]", "{0}[{1}]"),
    "take_second": ("{0}[:, {1}]", "{0}[:, {1}]"),
    "masked": ("{0}[{1}]", "{0}[{1}]"),
    "avg_pool2d": (
        "{0}.avg_pool2d({k}, {stride}, {padding}, ceil_mode={ceil}, count_include_pad={include})",
        "torch.nn.functional.avg_pool2d({0}, {k}, {stride}, {padding}, ceil_mode={ceil}, count_include_pad={include})",
    ),
    "max_pool2d": ("{0}.max_pool2d(2)", "torch.nn.functional.max_pool2d({0}, 2)"),
    # the loss: each value nothing else reads, weighted and summed
    "weighted_sum": ("({0} * {1}).sum()", "({0} * {1}).sum()"),
}
SOURCES = ("leaf", "data", "index", "mask")
PREFIX = {"limn": "a", "torch": "t"}


@dataclass(frozen=True)
class Step:
    """One line of a case: value `out` is op applied to the values `srcs`, with `args` filled in."""

    out: int
    op: str
    srcs: tuple[int, ...] = ()
    args: dict[str, Any] = field(default_factory=dict)

    def line(self, framework: str) -> str:
        prefix = PREFIX[framework]
        template = SPELLINGS[self.op][framework == "torch"]
        srcs = [f"{prefix}{s}" for s in self.srcs]
        return f"{prefix}{self.out} = " + template.format(*srcs, out=self.out, **self.args)


@dataclass(frozen=True)
class Case:
    seed: int
    steps: tuple[Step, ...]
    data: dict[int, np.ndarray]  # x{i}: the array behind source step i
    loss: int
    special_reads: tuple[str, ...] = ()  # the ops of the steps that read a value holding NaN or inf

    def lines(self, framework: str) -> list[str]:
        prefix = PREFIX[framework]
        return [s.line(framework) for s in self.steps] + [f"{prefix}{self.loss}.backward()"]

    @property
    def values(self) -> list[int]:
        """The float values the program computes (every step but the data it reads)."""
        return [s.out for s in self.steps if s.op not in ("data", "index", "mask")]

    @property
    def leaves(self) -> list[int]:
        return [s.out for s in self.steps if s.op == "leaf"]

    def reproducer(self) -> str:
        """A standalone script that rebuilds this case in limn and torch and prints every difference."""
        lines = [
            f"# autograd fuzz case, seed {self.seed}",
            "import numpy as np",
            "import torch",
            "import limn",
            "from limn import Tensor",
            "",
            "def diff(a, t):",
            "    if a is None or t is None:",
            "        return f'limn {type(a).__name__}, torch {type(t).__name__}'",
            "    a, t = a.numpy().astype(np.float64), t.detach().numpy()",
            "    alike = (a == t) | (np.isnan(a) & np.isnan(t))  # NaN for NaN, inf for inf",
            "    with np.errstate(invalid='ignore'):  # inf - inf, where alike already holds",
            "        return float(np.where(alike, 0.0, np.abs(a - t)).max(initial=0.0))",
            "",
        ]
        for i, arr in self.data.items():
            values = repr(arr.tolist()).replace("nan", "float('nan')").replace("inf", "float('inf')")
            lines.append(f"x{i} = np.array({values}, dtype=np.{arr.dtype}).reshape({arr.shape})")
        lines += ["", "# limn", *self.lines("limn"), "", "# torch", *self.lines("torch"), ""]
        lines += [f"print('v{i}', diff(a{i}, t{i}))" for i in self.values]
        lines += [f"print('grad of v{i}', diff(a{i}.grad, t{i}.grad))" for i in self.leaves]
        return "\n".join(lines)


# ---- the generator ----


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


def finite(v: np.ndarray) -> np.ndarray:
    """The finite values of v, flat: what the kink and tie checks look at (special values are exact)."""
    return v[np.isfinite(v)]


def _broadcastable(*shapes: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


class Generator:
    """Builds one case step by step, running each step in torch to see the values it makes."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.composed = seed >= COMPOSED_FROM  # the second set: limn's compositions too, finite leaves
        self.selecting = seed >= SELECTING_FROM  # the third set: the ops that pick elements too
        self.specials = 0.0 if self.composed else SPECIAL_LEAVES
        self.rng = np.random.default_rng(seed)
        self.dtype = np.float64 if self.rng.random() < 0.25 else np.float32
        self.steps: list[Step] = []
        self.data: dict[int, np.ndarray] = {}
        self.ns: dict[str, Any] = {"torch": torch}
        self.pool: list[int] = []  # float values later steps may read

    # -- emitting steps --

    def emit(self, op: str, *srcs: int, bound: float = BOUND, **args: Any) -> int | None:
        """Appends op(srcs) when its value is small, its finite values bounded, and it is non-finite only where
        a source is (a special value propagating, not an overflow); otherwise leaves no trace."""
        out = len(self.steps)
        step = Step(out, op, _ints(srcs), args)
        exec(step.line("torch"), self.ns)
        value = self.ns[f"t{out}"]
        if value.numel() > MAX_SIZE or value.ndim > 5:
            return None
        sources_finite = all(torch.isfinite(self.ns[f"t{s}"]).all() for s in srcs)
        if sources_finite and not torch.isfinite(value).all():
            return None
        finite_values = value[torch.isfinite(value)]
        if finite_values.numel() and finite_values.abs().max().item() > bound:
            return None
        self.steps.append(step)
        self.pool.append(out)
        return out

    def source(self, op: str, arr: np.ndarray) -> int:
        out = len(self.steps)
        self.data[out] = arr
        self.ns[f"x{out}"] = arr
        step = Step(out, op)
        exec(step.line("torch"), self.ns)
        self.steps.append(step)
        if op == "leaf":
            self.pool.append(out)
        return out

    def leaf(self, shape: tuple[int, ...], dtype: Any = None, kind: str = "normal") -> int:
        """A new input that requires grad: standard normal, or `away` from 0 (|x| in [0.5, 2]), or
        `positive` (in [0.5, 2]); a fraction `specials` of them hold a few special values."""
        dtype = dtype or self.dtype
        if kind == "normal":
            arr = self.rng.standard_normal(shape)
        else:
            arr = self.rng.uniform(0.5, 2.0, shape)
            if kind == "away":
                arr *= self.rng.choice([-1.0, 1.0], shape)
        arr = np.asarray(arr, dtype=dtype)
        if arr.size and self.rng.random() < self.specials:
            flat = arr.reshape(-1)
            spots = self.rng.choice(flat.size, int(self.rng.integers(1, min(3, flat.size) + 1)), replace=False)
            flat[spots] = self.rng.choice(SPECIALS, spots.size)
        return self.source("leaf", arr)

    # -- reading the values built so far --

    def value(self, i: int) -> np.ndarray:
        return self.ns[f"t{i}"].detach().double().numpy()

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(self.ns[f"t{i}"].shape)

    def is64(self, i: int) -> bool:
        return self.ns[f"t{i}"].dtype == torch.float64

    def pick(self, min_ndim: int = 0, max_ndim: int = 5, where: Any = None) -> int | None:
        """A value from the pool that fits: mostly the newest (so chains grow deep), else any."""
        fits = [i for i in self.pool if min_ndim <= len(self.shape(i)) <= max_ndim]
        fits = [i for i in fits if where is None or where(i)]
        if not fits:
            return None
        if self.rng.random() < 0.6:
            return fits[-1]
        return fits[int(self.rng.integers(len(fits)))]

    def matching(self, x: int, dtype_of: int | None = None) -> int:
        """x, cast to the dtype of value `dtype_of` if it differs (torch promotes 0-d tensors its own way)."""
        if dtype_of is None or self.is64(x) == self.is64(dtype_of):
            return x
        cast = self.emit("to_float64" if self.is64(dtype_of) else "to_float32", x)
        assert cast is not None, "a cast of a bounded value stays bounded"
        return cast

    def random_shape(self) -> tuple[int, ...]:
        ndim = int(self.rng.choice(5, p=[0.05, 0.25, 0.35, 0.25, 0.1]))
        return _ints(self.rng.integers(1, 6, ndim))

    def broadcast_partner_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with `shape`: a suffix of it, some dims 1, maybe one more leading dim."""
        keep = int(self.rng.integers(0, len(shape) + 1))
        out = [1 if self.rng.random() < 0.3 else s for s in shape[len(shape) - keep :]]
        if keep == len(shape) < 4 and self.rng.random() < 0.2:
            out.insert(0, int(self.rng.integers(2, 4)))
        return tuple(out)

    def partner(self, x: int, kind: str = "normal") -> int:
        """A second operand for x: a value already in the pool that broadcasts with it, or a new leaf."""
        shape = self.shape(x)
        near = [i for i in self.pool if _broadcastable(self.shape(i), shape)]
        if kind == "normal" and near and self.rng.random() < 0.4:
            other = near[int(self.rng.integers(len(near)))]
        else:
            other = self.leaf(self.broadcast_partner_shape(shape), kind=kind)
        if not self.shape(other) or not shape:
            other = self.matching(other, x)
        return other

    def axis_arg(self, ndim: int) -> tuple[Any, tuple[int, ...]]:
        """A reduce's axis as limn takes it (None, an int, or a tuple) and the dims it names."""
        r = self.rng.random()
        if r < 0.2:
            return None, tuple(range(ndim))
        if r < 0.4 and ndim >= 2:
            dims = _ints(sorted(self.rng.choice(ndim, 2, replace=False)))
            return dims, dims
        d = int(self.rng.integers(ndim))
        return (d - ndim if self.rng.random() < 0.3 else d), (d,)


def _clear_of_ties(values: np.ndarray, dims: tuple[int, ...], smallest: bool) -> bool:
    """Whether the winner of a max (or min) over dims beats the runner-up by MARGIN in every slice. A slice
    holding NaN has NaN for its answer, and a tie of infinities is exact, so neither is a near tie."""
    rest = [d for d in range(values.ndim) if d not in dims]
    rows = values.transpose(rest + list(dims)).reshape(-1, math.prod(values.shape[d] for d in dims))
    rows = rows[~np.isnan(rows).any(axis=1)]
    if rows.size == 0 or rows.shape[1] < 2:
        return True
    rows = np.sort(rows, axis=1)
    winner, runner_up = (rows[:, 0], rows[:, 1]) if smallest else (rows[:, -1], rows[:, -2])
    exact = np.isinf(winner) & (winner == runner_up)
    with np.errstate(invalid="ignore"):  # inf - inf
        return bool(((np.abs(winner - runner_up) > MARGIN) | exact).all())


# -- one proposer per op family: each picks its sources, checks its preconditions, emits or gives up --


def propose_reshape(g: Generator) -> int | None:
    x = g.pick()
    factors = _prime_factors(math.prod(g.shape(x)))
    g.rng.shuffle(factors)
    dims = [1] * int(g.rng.integers(1, 4))
    for f in factors:
        dims[int(g.rng.integers(len(dims)))] *= f
    shape = [d for d in dims if d != 1 or g.rng.random() < 0.3]
    if shape and g.rng.random() < 0.3:
        shape[int(g.rng.integers(len(shape)))] = -1
    return g.emit("reshape", x, shape=tuple(shape))


def propose_permute(g: Generator) -> int | None:
    x = g.pick(min_ndim=2)
    if x is None:
        return None
    if g.rng.random() < 0.3:
        a, b = g.rng.choice(len(g.shape(x)), 2, replace=False)
        return g.emit("transpose", x, a=int(a), b=int(b) - len(g.shape(x)))
    return g.emit("permute", x, order=_ints(g.rng.permutation(len(g.shape(x)))))


def propose_expand(g: Generator) -> int | None:
    x = g.pick(min_ndim=1, where=lambda i: 1 in g.shape(i))
    if x is None:
        return None
    shape = tuple(int(g.rng.integers(2, 5)) if s == 1 else (-1 if g.rng.random() < 0.2 else s) for s in g.shape(x))
    return g.emit("expand", x, shape=shape)


def propose_pad(g: Generator) -> int | None:
    x = g.pick(min_ndim=1, max_ndim=4)
    if x is None:
        return None
    ndim = len(g.shape(x))
    widths = [(0, 0)] * ndim
    for d in {int(d) for d in g.rng.integers(0, ndim, int(g.rng.integers(1, 3)))}:
        widths[d] = _ints(g.rng.integers(0, 3, 2))
    widths = tuple(widths)
    flat = tuple(w for pair in reversed(widths) for w in pair)  # torch lists the last dim first
    value = 1.5 if g.rng.random() < 0.2 else 0
    return g.emit("pad", x, widths=widths, flat=flat, value=value)


def propose_shrink(g: Generator) -> int | None:
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    box = []
    for s in g.shape(x):
        start = int(g.rng.integers(0, s))
        box.append((start, int(g.rng.integers(start + 1, s + 1))))
    slices = ", ".join(f"{start}:{end}" for start, end in box)
    return g.emit("shrink", x, box=tuple(box), slices=slices)


def propose_index(g: Generator) -> int | None:
    """Basic indexing written the same in both: ints (negative too), slices, `...` and None."""
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    items = []
    for s in g.shape(x):
        r = g.rng.random()
        if r < 0.3:
            j = int(g.rng.integers(0, s))
            items.append(str(j - s if g.rng.random() < 0.5 else j))
        elif r < 0.7:
            start = int(g.rng.integers(0, s))
            stop = int(g.rng.integers(start + 1, s + 1))
            lo = str(start - s) if g.rng.random() < 0.3 else ("" if start == 0 else str(start))
            hi = (
                ""
                if stop == s and g.rng.random() < 0.5
                else str(stop - s if stop < s and g.rng.random() < 0.3 else stop)
            )
            items.append(f"{lo}:{hi}")
        else:
            items.append(":")
    if items[-1] == ":" and g.rng.random() < 0.5:
        while items and items[-1] == ":":
            items.pop()
        items.append("...")
    if g.rng.random() < 0.3:
        items.insert(int(g.rng.integers(0, len(items) + 1)), "None")
    return g.emit("index_with", x, index=", ".join(items))


def propose_flatten(g: Generator) -> int | None:
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    ndim = len(g.shape(x))
    start = int(g.rng.integers(0, ndim))
    end = int(g.rng.integers(start, ndim))
    return g.emit("flatten", x, start=start, end=end - ndim if g.rng.random() < 0.5 else end)


def propose_squeeze(g: Generator) -> int | None:
    if g.rng.random() < 0.5:
        x = g.pick(max_ndim=3)
        if x is None:
            return None
        ndim = len(g.shape(x))
        return g.emit("unsqueeze", x, axis=int(g.rng.integers(-ndim - 1, ndim + 1)))
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    ndim = len(g.shape(x))
    return g.emit("squeeze", x, axis=int(g.rng.integers(-ndim, ndim)))


def propose_join(g: Generator) -> int | None:
    """cat with a new leaf or with itself (a value read twice), or stack two of one shape."""
    x = g.pick(min_ndim=1, max_ndim=3)
    if x is None:
        return None
    shape = g.shape(x)
    axis = int(g.rng.integers(0, len(shape)))
    if g.rng.random() < 0.3:
        other = x
    else:
        other_shape = tuple(int(g.rng.integers(1, 4)) if d == axis else s for d, s in enumerate(shape))
        other = g.leaf(other_shape, dtype=np.float64 if g.is64(x) else np.float32)
    first, second = (x, other) if g.rng.random() < 0.5 else (other, x)
    if g.rng.random() < 0.3 and g.shape(first) == g.shape(second):
        return g.emit("stack", first, second, axis=int(g.rng.integers(0, len(shape) + 1)))
    return g.emit("cat", first, second, axis=axis)


def propose_split(g: Generator) -> int | None:
    x = g.pick(min_ndim=1, where=lambda i: max(g.shape(i)) >= 2)
    if x is None:
        return None
    shape = g.shape(x)
    axis = int(g.rng.choice([d for d, s in enumerate(shape) if s >= 2]))
    n = shape[axis]
    if g.rng.random() < 0.5:
        chunks = int(g.rng.integers(2, n + 1))
        pieces = math.ceil(n / math.ceil(n / chunks))  # torch may return fewer chunks than asked for
        return g.emit("chunk", x, n=chunks, axis=axis, i=int(g.rng.integers(0, pieces)))
    if g.rng.random() < 0.5:
        size = int(g.rng.integers(1, n))
        return g.emit("split", x, sizes=size, axis=axis, i=int(g.rng.integers(0, math.ceil(n / size))))
    cut = int(g.rng.integers(1, n))
    return g.emit("split", x, sizes=[cut, n - cut], axis=axis, i=int(g.rng.integers(0, 2)))


UNARY_PRECONDITIONS = {
    "exp": lambda v: finite(v).max(initial=0.0) < 3,
    "elu": lambda v: np.abs(finite(v)).min(initial=1.0) > MARGIN,
    "expm1": lambda v: finite(v).max(initial=0.0) < 3,
    "log1p": lambda v: finite(v).min(initial=1.0) > -0.9,
    "leaky_relu": lambda v: np.abs(finite(v)).min(initial=1.0) > MARGIN,
    "log": lambda v: finite(v).min(initial=1.0) > 0.1,
    "sqrt": lambda v: finite(v).min(initial=1.0) > 0.1,
    "relu": lambda v: np.abs(finite(v)).min(initial=1.0) > MARGIN,
    "abs": lambda v: np.abs(finite(v)).min(initial=1.0) > MARGIN,
}
# a leaf's -0.0 or 0.0 is exact in both frameworks, so relu and abs may meet it there (not a computed 0)
EXACT_ZEROS_OK = ("relu", "abs", "leaky_relu")


UNARIES = ["neg", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "gelu", "abs", "contiguous"]
COMPOSED_UNARIES = ["softplus", "mish", "logsigmoid", "elu", "leaky_relu"]  # limn.composed.functional.activations
COMPOSED_UNARIES += [
    "sin",
    "cos",
    "atan",
    "asinh",
    "expm1",
    "log1p",
]  # limn.composed.math.trig, limn.composed.math.logexp (CARRIED)


def propose_unary(g: Generator) -> int | None:
    op = str(g.rng.choice(UNARIES + (COMPOSED_UNARIES if g.composed else [])))
    ok = UNARY_PRECONDITIONS.get(op, lambda v: True)

    def fits(i: int) -> bool:
        v = g.value(i)
        if op in EXACT_ZEROS_OK and g.steps[i].op == "leaf":
            v = v[v != 0]
        return ok(v)

    x = g.pick(where=fits)
    if x is None:
        if op not in ("log", "sqrt"):
            return None
        x = g.leaf(g.random_shape(), kind="positive")
    return g.emit(op, x)


def propose_binary(g: Generator) -> int | None:
    op = str(g.rng.choice(["add", "sub", "mul", "div", "maximum", "minimum"]))
    x = g.pick()
    other = g.partner(x, kind="away" if op == "div" else "normal")
    a, b = (x, other) if g.rng.random() < 0.5 else (other, x)
    if op == "div" and np.abs(finite(g.value(b))).min(initial=1.0) < 0.2:
        return None
    if op in ("maximum", "minimum"):
        va, vb = np.broadcast_arrays(g.value(a), g.value(b))
        with np.errstate(invalid="ignore"):  # inf - inf is an exact tie, and NaN no tie
            gaps = finite(va - vb)
        if np.abs(gaps).min(initial=1.0) < MARGIN:
            return None
    return g.emit(op, a, b)


def propose_scalar(g: Generator) -> int | None:
    """A python scalar on one side: x * c, x + c, c - x, c / x, x ** p."""
    op = str(g.rng.choice(["scale", "shift", "rsub", "rdiv", "pow"]))
    c = float(np.round(g.rng.uniform(-2, 2), 2))
    if op == "pow":
        p = [2, 3, -1, -2, 0.5, 1.5][int(g.rng.integers(6))]
        if p < 0:
            need = lambda v: np.abs(finite(v)).min(initial=1.0) > 0.3  # away from the pole at 0
        elif isinstance(p, float):
            # a fractional power needs a positive base; -inf is the gradient limn cannot match (test_edge_values)
            need = lambda v: finite(v).min(initial=1.0) > 0.1 and not (v == -math.inf).any()
        else:
            need = lambda v: True
        x = g.pick(where=lambda i: need(g.value(i)))
        return None if x is None else g.emit("pow", x, p=p)
    if op == "rdiv":
        x = g.pick(where=lambda i: np.abs(finite(g.value(i))).min(initial=1.0) > 0.2)
        return None if x is None else g.emit("rdiv", x, c=c)
    return g.emit(op, g.pick(), c=c)


def propose_where(g: Generator) -> int | None:
    """(c > t).where(a, b) with no element of c within MARGIN of the threshold t."""
    x = g.pick()
    cond = g.pick(where=lambda i: _broadcastable(g.shape(i), g.shape(x)))
    values = g.value(cond)
    t = float(np.round(g.rng.normal(), 2))
    if np.abs(finite(values - t)).min(initial=1.0) < MARGIN:
        return None
    other = g.matching(g.partner(x), x)
    if not _broadcastable(g.shape(cond), g.shape(x), g.shape(other)):
        return None
    a, b = (x, other) if g.rng.random() < 0.5 else (other, x)
    return g.emit("where", cond, a, b, t=t)


def propose_cast(g: Generator) -> int | None:
    x = g.pick()
    return g.emit("to_float32" if g.is64(x) else "to_float64", x)


def propose_reduce(g: Generator) -> int | None:
    op = str(g.rng.choice(["sum", "mean", "max", "min", "var", "logsumexp", "softmax", "log_softmax"]))
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    shape = g.shape(x)
    ndim = len(shape)
    if op in ("softmax", "log_softmax"):
        d = int(g.rng.integers(0, ndim))
        return g.emit(op, x, axis=d - ndim if g.rng.random() < 0.5 else d)
    axis, dims = g.axis_arg(ndim)
    args = {"axis": axis, "dim": dims, "keepdim": bool(g.rng.random() < 0.5)}
    if op in ("max", "min") and not _clear_of_ties(g.value(x), dims, smallest=op == "min"):
        return None
    if op == "var":
        n = math.prod(shape[d] for d in dims)
        args["correction"] = int(g.rng.integers(0, 2)) if n >= 2 else 0
    return g.emit(op, x, **args)


def propose_scan(g: Generator) -> int | None:
    """cumsum, cumprod or logcumsumexp along one dim. cumprod reads small finite values only: products stay
    bounded, and its gradient at an inf is torch's inf / inf = NaN, a formula limn does not copy."""
    op = str(g.rng.choice(["cumsum", "cumprod", "logcumsumexp"]))
    need = {"cumprod": lambda v: bool(np.isfinite(v).all()) and np.abs(v).max(initial=0.0) < 1.5}
    x = g.pick(min_ndim=1, where=lambda i: need.get(op, lambda v: True)(g.value(i)))
    if x is None:
        return None
    ndim = len(g.shape(x))
    d = int(g.rng.integers(0, ndim))
    return g.emit(op, x, axis=d - ndim if g.rng.random() < 0.5 else d)


def propose_rearrange(g: Generator) -> int | None:
    """flip or roll some dims, or tril of a matrix batch (composed.movement: rearrange, triangles)."""
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    ndim = len(g.shape(x))
    dims = _ints(sorted(g.rng.choice(ndim, int(g.rng.integers(1, min(ndim, 2) + 1)), replace=False)))
    r = g.rng.random()
    if r < 0.4:
        return g.emit("flip", x, dims=dims)
    if r < 0.8 or ndim < 2:
        shifts = _ints(g.rng.integers(-3, 4, len(dims)))
        return g.emit("roll", x, shifts=shifts, dims=dims)
    return g.emit("tril", x, k=int(g.rng.integers(-1, 2)))


def propose_matmul(g: Generator) -> int | None:
    """x @ w or w @ x with a new leaf w: vectors, matrices, and batches that broadcast."""
    x = g.pick(min_ndim=1, max_ndim=3)
    if x is None:
        return None
    shape = g.shape(x)
    dtype = np.float64 if g.is64(x) else np.float32
    m = int(g.rng.integers(1, 5))
    if len(shape) >= 2 and g.rng.random() < 0.3:  # x on the right: (m, n) @ (..., n, k)
        w = g.leaf((m, shape[-2]) if g.rng.random() < 0.7 else (shape[-2],), dtype)
        return g.emit("matmul", w, x)
    k = shape[-1]
    r = g.rng.random()
    if r < 0.2:
        w_shape: tuple[int, ...] = (k,)
    elif r < 0.7 or len(shape) < 3:
        w_shape = (k, m)
    else:
        w_shape = tuple(1 if g.rng.random() < 0.3 else s for s in shape[:-2]) + (k, m)
    return g.emit("matmul", x, g.leaf(w_shape, dtype))


def propose_indexed(g: Generator) -> int | None:
    """gather from x, or scatter_add a new leaf into x, along an axis with random in-range indices."""
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    shape = g.shape(x)
    axis = int(g.rng.integers(0, len(shape)))
    idx_shape = tuple(
        int(g.rng.integers(1, 5)) if d == axis else int(g.rng.integers(1, s + 1)) for d, s in enumerate(shape)
    )
    idx = g.source("index", g.rng.integers(0, shape[axis], idx_shape).astype(np.int32))
    if g.rng.random() < 0.6:
        return g.emit("gather", x, idx, axis=axis)
    upd = g.leaf(idx_shape, np.float64 if g.is64(x) else np.float32)
    return g.emit("scatter_add", x, idx, upd, axis=axis)


def _distinct_along(values: np.ndarray, axis: int) -> bool:
    """No two values along axis within MARGIN of each other: the order a sort gives is not a rounding's."""
    return bool((np.diff(np.sort(values, axis=axis), axis=axis) > MARGIN).all())


def propose_sort(g: Generator) -> int | None:
    """The values of sort (either order) or topk (largest or smallest) along one dim free of ties."""
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    shape = g.shape(x)
    ndim = len(shape)
    d = int(g.rng.integers(0, ndim))
    if shape[d] == 0 or not _distinct_along(g.value(x), d):
        return None
    axis = d - ndim if g.rng.random() < 0.5 else d
    if g.rng.random() < 0.5:
        return g.emit("sort", x, axis=axis, descending=bool(g.rng.random() < 0.5))
    k = int(g.rng.integers(1, shape[d] + 1))
    return g.emit("topk", x, k=k, axis=axis, largest=bool(g.rng.random() < 0.5))


def propose_take(g: Generator) -> int | None:
    """x[idx] or x[:, idx] with an int tensor (negative and repeated indices too: repeated ones add up their
    gradients), or x[mask] with a bool mask of x's shape (a 1-d result of data-dependent length)."""
    x = g.pick(min_ndim=1)
    if x is None:
        return None
    shape = g.shape(x)
    if g.rng.random() < 0.3:
        return g.emit("masked", x, g.source("mask", g.rng.random(shape) < 0.5))
    d = 0 if len(shape) == 1 or g.rng.random() < 0.6 else 1
    if shape[d] == 0:
        return None
    idx = g.rng.integers(-shape[d], shape[d], int(g.rng.integers(1, 6))).astype(np.int32)
    return g.emit("take" if d == 0 else "take_second", x, g.source("index", idx))


def _one_winner_per_window(values: np.ndarray) -> bool:
    """Every 2x2 window of the last two dims (as max_pool2d(2) cuts them) has one clear largest value."""
    h, w = values.shape[-2] // 2 * 2, values.shape[-1] // 2 * 2
    cut = values[..., :h, :w].reshape(*values.shape[:-2], h // 2, 2, w // 2, 2)
    windows = np.sort(np.moveaxis(cut, -3, -2).reshape(*cut.shape[:-4], h // 2, w // 2, 4), axis=-1)
    return bool((windows[..., -1] - windows[..., -2] > MARGIN).all())


def propose_pool(g: Generator) -> int | None:
    """avg_pool2d (kernel 2 or 3, stride 1 or 2, padding, ceil_mode, count_include_pad) or max_pool2d(2) over
    the last two dims of a (C, H, W) or (N, C, H, W) value; max only where each window has one winner."""
    x = g.pick(min_ndim=3, max_ndim=4, where=lambda i: min(g.shape(i)[-2:]) >= 2)
    if x is None:  # few random values are images: start one
        x = g.leaf(_ints(g.rng.integers([1, 2, 2], [4, 7, 7])))
    if g.rng.random() < 0.4:
        return g.emit("max_pool2d", x) if _one_winner_per_window(g.value(x)) else None
    k = int(g.rng.integers(2, 4))
    padding = int(g.rng.integers(0, k // 2 + 1))
    if min(g.shape(x)[-2:]) + 2 * padding < k:
        return None
    args = {"k": k, "stride": int(g.rng.integers(1, 3)), "padding": padding}
    return g.emit("avg_pool2d", x, **args, ceil=bool(g.rng.random() < 0.5), include=bool(g.rng.random() < 0.5))


PROPOSERS = [
    (propose_reshape, 2),
    (propose_permute, 1),
    (propose_expand, 1),
    (propose_pad, 1),
    (propose_shrink, 1),
    (propose_index, 1),
    (propose_flatten, 0.5),
    (propose_squeeze, 1),
    (propose_join, 1),
    (propose_split, 1),
    (propose_unary, 3),
    (propose_binary, 3),
    (propose_scalar, 1),
    (propose_where, 1),
    (propose_cast, 0.5),
    (propose_reduce, 3),
    (propose_matmul, 1.5),
    (propose_indexed, 1),
]
COMPOSED_PROPOSERS = [(propose_scan, 0.7), (propose_rearrange, 0.7)]
SELECTING_PROPOSERS = [(propose_sort, 2.5), (propose_take, 2.5), (propose_pool, 2.5)]


@functools.cache
def generate(seed: int) -> Case:
    g = Generator(seed)
    proposers = PROPOSERS + (COMPOSED_PROPOSERS if g.composed else []) + (SELECTING_PROPOSERS if g.selecting else [])
    for _ in range(int(g.rng.integers(1, 3))):
        g.leaf(g.random_shape())
    target = int(g.rng.integers(5, 15))
    weights = np.array([w for _, w in proposers]) / sum(w for _, w in proposers)
    made = 0
    for _ in range(target * 10):
        if made == target:
            break
        propose = proposers[int(g.rng.choice(len(proposers), p=weights))][0]
        if propose(g) is not None:
            made += 1
    # the loss: every value nothing else reads, each weighted by fixed random data and summed
    read = {s for step in g.steps for s in step.srcs}
    total = None
    for i in [i for i in g.pool if i not in read]:
        w = g.source("data", g.rng.standard_normal(g.shape(i)).astype(np.float64 if g.is64(i) else np.float32))
        term = g.emit("weighted_sum", i, w, bound=math.inf)
        total = term if total is None else g.emit("add", total, term, bound=math.inf)
    special = [s.op for s in g.steps if any(not torch.isfinite(g.ns[f"t{i}"]).all() for i in s.srcs)]
    return Case(seed, tuple(g.steps), dict(g.data), total, tuple(special))


# ---- running a case both ways ----


def run(case: Case, framework: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"torch": torch, "Tensor": Tensor, **{f"x{i}": a for i, a in case.data.items()}}
    for line in case.lines(framework):
        exec(line, ns)
    return ns


def first_mismatch(case: Case, ours: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """The first value, then the first gradient, where limn and torch disagree, described."""
    values = [(f"v{i}", ours[f"a{i}"], theirs[f"t{i}"]) for i in case.values]
    grads = [(f"the gradient of v{i}", ours[f"a{i}"].grad, theirs[f"t{i}"].grad) for i in case.leaves]
    limn.realize(*[t for _, t, _ in values + grads if t is not None])
    for what, got, want in values + grads:
        if got is None or want is None:
            if got is not None or want is not None:
                return f"{what}: limn gives {type(got).__name__}, torch {type(want).__name__}"
            continue
        got_np, want_np = got.numpy(), want.detach().numpy()
        if got_np.shape != want_np.shape or got_np.dtype != want_np.dtype:
            return f"{what}: limn gives {got_np.dtype}{got_np.shape}, torch {want_np.dtype}{want_np.shape}"
        if not np.allclose(got_np, want_np, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True):
            alike = (got_np == want_np) | (np.isnan(got_np) & np.isnan(want_np))
            err = np.where(alike, 0.0, np.abs(got_np.astype(np.float64) - want_np)).max()
            return f"{what}: max |limn - torch| = {err:.3g}\nlimn:\n{got_np}\ntorch:\n{want_np}"
    return None


@pytest.mark.parametrize("seed", SEEDS)
def test_forward_and_backward_match_torch(seed: int) -> None:
    case = generate(seed)
    theirs = run(case, "torch")
    try:
        ours = run(case, "limn")
        problem = first_mismatch(case, ours, theirs)
    except Exception as e:  # a crash in limn is a failure like any other, and gets the reproducer too
        problem = f"limn raised {type(e).__name__}: {e}"
    assert problem is None, f"seed {seed}: {problem}\n\n---- reproducer ----\n{case.reproducer()}"


def test_reproducer_runs_standalone(capsys: pytest.CaptureFixture[str]) -> None:
    case = generate(0)
    exec(case.reproducer(), {"__name__": "__main__"})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(case.values) + len(case.leaves)
    diffs = [float(line.split()[-1]) for line in printed if "NoneType" not in line]
    assert diffs and max(diffs) < TOLERANCE, printed


def test_the_cases_use_every_spelling() -> None:
    used = Counter(step.op for seed in SEEDS for step in generate(seed).steps)
    missing = [op for op in SPELLINGS if used[op] == 0]
    assert not missing, f"no case uses {missing}; op counts: {dict(used)}"


# the primitives no case reaches, and why: the fuzzer differentiates, and these make no gradient of their own
UNREACHED = {
    Op.ASSIGN: "a write into a buffer records no gradient history (tests/nn/test_assign_reads.py holds it)",
    Op.CUSTOM: "a device kernel's backward is its own rule (tests/core/test_custom.py holds it against torch)",
}


def test_the_cases_reach_every_primitive_and_every_gradient_rule() -> None:
    """Driven from the op table, not from SPELLINGS: every Op must appear in some case's graph (forward or
    gradient), and every row of autograd.GRADIENTS must run, except the ops in UNREACHED."""
    nodes: set[Op] = set()
    rules: set[Op | Movement] = set()
    for seed in SEEDS:
        case = generate(seed)
        ns = run(case, "limn")
        values = [ns[f"a{i}"] for i in case.values]
        grads = [ns[f"a{i}"].grad for i in case.leaves if ns[f"a{i}"].grad is not None]
        nodes |= {n.op for n in toposort([t.node for t in values + grads])}
        for t in values:
            rules |= {u._ctx.rule for u in autograd._tensor_toposort(t) if u._ctx is not None}
    missing_ops = [op for op in Op if op not in nodes and op not in UNREACHED]
    assert not missing_ops, f"no case's graph holds {missing_ops}; add a proposer that reaches them"
    missing_rules = [r for r in autograd.GRADIENTS if r not in rules and r not in UNREACHED]
    assert not missing_rules, f"no case runs the gradient rules of {missing_rules}"
    reached = [op for op in UNREACHED if op in nodes]
    assert not reached, f"{reached} are reached now: take them out of UNREACHED"


# op families that must meet NaN or inf somewhere in the cases: comparisons (inside where), the kinked ops
# and the reductions whose answers NaN and inf change
MEETS_SPECIALS = ("where", "maximum", "minimum", "max", "min", "relu", "abs", "softmax", "log_softmax", "logsumexp")


def test_the_cases_feed_special_values_to_comparisons_kinks_and_reductions() -> None:
    met = Counter(op for seed in range(CASES) for op in generate(seed).special_reads)
    missing = [op for op in MEETS_SPECIALS if met[op] == 0]
    assert not missing, f"no case feeds NaN or inf to {missing}; counts: {dict(met)}"


def test_the_cases_are_dags_with_shared_values() -> None:
    """Some values are read by more than one step: gradients must add up where paths meet."""
    shared = 0
    for seed in range(CASES):
        reads = Counter(s for step in generate(seed).steps for s in step.srcs)
        shared += any(n > 1 for n in reads.values())
    assert shared > CASES // 3, f"only {shared} of {CASES} cases read a value twice"
