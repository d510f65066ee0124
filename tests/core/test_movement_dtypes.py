"""The movement and indexing ops over every dtype they accept, against torch: float64, int32, int16, int8 and
bool on numpy and on c, float16 on numpy only (the c device declines half widths). bfloat16 has no torch
oracle here (torch cannot read numpy's bfloat16), so it is checked against float32 rounded to bfloat16.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import Table, case

import limn
from limn import Tensor

BASE = np.array([[3, -1, 0, 7], [2, 5, -4, 1], [0, 1, 6, -2]])
DTYPES = ["float64", "int32", "int16", "int8", "bool"]

EXPRESSIONS = {
    "flip": "x.flip(1)",
    "roll": "x.roll(1, 0)",
    "repeat": "x.repeat(2, 1)",
    "repeat_interleave": "x.repeat_interleave(2, 1)",
    "unfold": "x.unfold(1, 2, 1)",
    "tril": "x.tril()",
    "diagonal": "x.diagonal(1)",
    "pad_reflect": ("x.pad((1, 1), mode='reflect')", "torch.nn.functional.pad(x, (1, 1), mode='reflect')"),
    "pad_constant": ("x.pad((1, 0, 0, 1), value=1)", "torch.nn.functional.pad(x, (1, 0, 0, 1), value=1)"),
    "getitem_step": "x[::2, 1::2]",
    "getitem_list": "x[[2, 0], [1, 1]]",
    "getitem_mask": "x[m]",
    "setitem_box": "(y := x.clone()).__setitem__(np.s_[1:, :2], x[:2, 2:]) or y",
    "setitem_mask": "(y := x.clone()).__setitem__(m, x[m]) or y",
    "gather": ("x.gather(1, i)", "x.gather(1, i.long())"),
    "scatter": ("x.scatter(1, i, x[:, :2])", "x.scatter(1, i.long(), x[:, :2])"),
    "index_select": ("x.index_select(1, i[0])", "x.index_select(1, i[0].long())"),
    "masked_fill": ("x.masked_fill(m, x[0, 0])", "x.masked_fill(m, x[0, 0])"),
    "masked_select": "x.masked_select(m)",
}
MASK = BASE > 0
IDX = np.array([[1, 3], [0, 0], [2, 1]], np.int32)  # a repeat in row 1: the last write wins


def _row(name: str, dtype: str) -> object:
    expr = EXPRESSIONS[name]
    mine, theirs = (expr, expr) if isinstance(expr, str) else expr
    if name == "pad_reflect" and dtype == "bool":
        mine, theirs = mine.replace("x.pad", "x.cast('int8').pad"), theirs.replace("(x,", "(x.to(torch.int8),")
    return case(mine, theirs, x=BASE.astype(dtype), m=MASK, i=IDX, id=f"{name}_{dtype}")


TABLE = Table([_row(name, dtype) for dtype in DTYPES for name in EXPRESSIONS])
HALF = Table([_row(name, "float16") for name in EXPRESSIONS])


@pytest.mark.parametrize("name", TABLE.ids)
def test_movement_and_indexing_over_each_dtype_match_torch(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


@pytest.mark.parametrize("name", HALF.ids)
def test_movement_and_indexing_over_float16_match_torch_on_numpy(name: str) -> None:
    HALF.assert_agrees("numpy", name)


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_movement_and_indexing_over_bfloat16_equal_float32_rounded(name: str) -> None:
    expr = EXPRESSIONS[name] if isinstance(EXPRESSIONS[name], str) else EXPRESSIONS[name][0]
    scope = {"np": np, "m": Tensor(MASK), "i": Tensor(IDX)}
    wide = eval(expr, {**scope, "x": Tensor(BASE.astype(np.float32))}).numpy()
    narrow = eval(expr, {**scope, "x": Tensor(BASE.astype(np.float32)).cast(limn.bfloat16)})
    assert narrow.dtype == limn.bfloat16, f"{expr}: {narrow.dtype}"
    np.testing.assert_array_equal(narrow.numpy().astype(np.float32), wide, err_msg=expr)
