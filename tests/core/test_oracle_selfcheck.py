"""Rule: the torch oracle finds a wrong value and a wrong gradient, and a table reports each row on its own."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import Table, agree, case

X = np.array([-1.5, 0.0, 2.0, np.nan], np.float32)

TABLE = Table(
    [
        case("x.exp()", x=X),
        case("x.relu() * 2", "torch.relu(x) * 2", x=X),
        case("x.exp()", "torch.exp(x) + 1", x=X, id="wrong value"),
        case("x.square()", "x * x.detach() * 2", x=np.array([1.0, 3.0], np.float32), id="wrong gradient"),
        case("x.nosuchop()", "x", x=X, id="limn raises"),
    ]
)


@pytest.mark.parametrize("name", ["x.exp()", "x.relu() * 2"])
def test_a_table_row_that_agrees_passes(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


@pytest.mark.parametrize("name", ["wrong value", "wrong gradient", "limn raises"])
def test_a_table_row_that_differs_fails_with_a_reproducer(device: str, name: str) -> None:
    with pytest.raises(AssertionError, match="reproducer"):
        TABLE.assert_agrees(device, name)


def test_agree_compares_gradients(device: str) -> None:
    agree(device, "x.square()", x=np.array([1.0, 3.0], np.float32))
    with pytest.raises(AssertionError, match=r"d/dx"):
        agree(device, "x.square()", "x * x.detach()", x=np.array([1.0, 3.0], np.float32))
