"""Rule: inside limn an op's dim has one name, `dim`, torch's. numpy's and tinygrad's `axis=` is read in one
place, limn.frontend.arguments.axis_is_dim, which passes it on as dim, as torch's own argument parser does
(torch.sum(x, axis=0)). So x.f(axis=k) is x.f(dim=k) for every method marked with it, and torch agrees.
max and min are the named difference: their `axis=` is tinygrad's reduce (the values alone, as amax and
amin), where torch's x.max(axis=1) is x.max(dim=1), a (values, indices) pair. The same mark, aliases(...),
reads other libraries' names for any one argument (tinygrad's neg_slope= and padding=, torch's min= and pad=)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

import limn
from limn import Tensor

ROOT = Path(__file__).resolve().parents[2]
X = np.array([[3.0, -1.0, 2.0], [0.5, 4.0, -2.0]], np.float32)

# (method, positional arguments before dim, other keyword arguments): each is called with axis=1 in limn and
# in torch; where the result is a pair (values, indices) both are compared
TORCH_TAKES_AXIS = [
    ("sum", (), {}),
    ("mean", (), {}),
    ("prod", (), {}),
    ("amax", (), {}),
    ("amin", (), {}),
    ("argmax", (), {}),
    ("argmin", (), {}),
    ("logsumexp", (), {}),
    ("any", (), {}),
    ("all", (), {}),
    ("count_nonzero", (), {}),
    ("nansum", (), {}),
    ("nanmean", (), {}),
    ("var", (), {}),
    ("std", (), {}),
    ("softmax", (), {}),
    ("log_softmax", (), {}),
    ("cumsum", (), {}),
    ("cumprod", (), {}),
    ("cummax", (), {}),
    ("cummin", (), {}),
    ("logcumsumexp", (), {}),
    ("sort", (), {}),
    ("argsort", (), {}),
    ("topk", (2,), {}),
    ("kthvalue", (1,), {}),
    ("median", (), {}),
    ("unsqueeze", (), {}),
    ("chunk", (2,), {}),
]


def _values(result) -> list[np.ndarray]:
    if isinstance(result, (tuple, list)):
        return [np.asarray(r.numpy() if isinstance(r, Tensor) else r.detach().numpy()) for r in result]
    return [np.asarray(result.numpy() if isinstance(result, Tensor) else result.detach().numpy())]


@pytest.mark.parametrize("name, before, kwargs", TORCH_TAKES_AXIS, ids=[row[0] for row in TORCH_TAKES_AXIS])
def test_axis_is_torchs_other_name_for_dim(name, before, kwargs):
    x = X if name not in ("any", "all", "count_nonzero") else X > 0
    got = getattr(Tensor(x), name)(*before, axis=1, **kwargs)
    want = getattr(torch.tensor(x), name)(*before, axis=1, **kwargs)
    same_as_dim = getattr(Tensor(x), name)(*before, dim=1, **kwargs)
    for g, w, d in zip(_values(got), _values(want), _values(same_as_dim), strict=True):
        np.testing.assert_allclose(g, w.astype(g.dtype), rtol=1e-6, err_msg=f"x.{name}(axis=1) against torch, x={x!r}")
        np.testing.assert_array_equal(g, d, err_msg=f"x.{name}(axis=1) against x.{name}(dim=1)")


def test_axis_reaches_cat_and_stack_as_torchs_does():
    a, b = torch.tensor(X), torch.tensor(X)
    for name in ("cat", "stack"):
        got = getattr(Tensor, name)([Tensor(X), Tensor(X)], axis=1).numpy()
        want = getattr(torch, name)([a, b], axis=1).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"Tensor.{name}([x, x], axis=1) against torch.{name}")


def test_max_and_min_read_axis_as_tinygrads_reduce_a_named_difference():
    values = Tensor(X).max(axis=1)
    assert isinstance(values, Tensor), "x.max(axis=1) gives the values alone (tinygrad's), torch's gives a pair"
    np.testing.assert_array_equal(values.numpy(), torch.tensor(X).max(axis=1).values.numpy())
    np.testing.assert_array_equal(Tensor(X).min(axis=0).numpy(), torch.tensor(X).amin(0).numpy())
    pair = Tensor(X).max(1)
    np.testing.assert_array_equal(pair.indices.numpy(), torch.tensor(X).max(1).indices.numpy())


def test_a_dim_given_twice_is_a_type_error_that_names_both():
    with pytest.raises(TypeError, match=r"sum\(\): got dim=0 and axis=1"):
        Tensor(X).sum(0, axis=1)
    with pytest.raises(TypeError, match=r"softmax\(\): got dim=0 and axis=1"):
        limn.nn.functional.softmax(Tensor(X), dim=0, axis=1)


def test_no_function_in_limn_takes_both_axis_and_dim():
    # the second spelling is read by axis_is_dim alone; max and min keep tinygrad's axis= (named above)
    both = []
    for path in ROOT.glob("packages/*/src/limn/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name not in ("max", "min", "_one_dim"):  # max and min's
                names = {a.arg for a in [*node.args.args, *node.args.kwonlyargs]}
                if {"axis", "dim"} <= names:
                    both.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not both, "functions that read both spellings themselves; mark them @axis_is_dim: " + "; ".join(both)


def test_a_method_marked_axis_is_dim_still_shows_its_own_signature():
    # functools.wraps keeps the signature and the source a reader and a type checker see
    assert list(inspect.signature(Tensor.sum).parameters) == ["self", "dim", "keepdim", "dtype"]
    assert inspect.getsource(Tensor.sum).lstrip().startswith("@axis_is_dim\n")


@pytest.mark.parametrize(
    "limn_call, torch_call",
    [
        (lambda x: x.leaky_relu(neg_slope=0.2), lambda t: torch.nn.functional.leaky_relu(t, negative_slope=0.2)),
        (lambda x: x.clip(min=-1.0, max=1.0), lambda t: t.clip(min=-1.0, max=1.0)),
        (lambda x: x.pad(pad=(1, 2)), lambda t: torch.nn.functional.pad(t, pad=(1, 2))),
        (lambda x: x.pad(padding=(1, 2)), lambda t: torch.nn.functional.pad(t, pad=(1, 2))),
    ],
    ids=["leaky_relu_neg_slope", "clip_min_max", "pad_pad", "pad_padding"],
)
def test_other_libraries_names_for_an_argument_reach_the_one_parameter(limn_call, torch_call):
    # the same mark, aliases(...), reads tinygrad's neg_slope= and padding= and torch's min=, max= and pad=
    got = limn_call(Tensor(X)).numpy()
    want = torch_call(torch.tensor(X)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg="an alias against torch's own argument")
