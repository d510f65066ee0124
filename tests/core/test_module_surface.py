"""Rule: limn's module level reads as torch's. A name torch users call at module level is a function here
too (limn.einsum, limn.dropout, limn.scatter, limn.device), never a module of the same name; a sub-package is
reachable as an attribute without importing it first (tests/test_public_paths.py, which needs the packages
above core); and nothing in limn writes sys.modules to fake a module path."""

import pkgutil
import re
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import limn
from limn import Tensor

ROOT = Path(__file__).resolve().parents[2]


def test_no_limn_module_is_named_after_a_torch_function():
    clashes = []
    for info in pkgutil.iter_modules(limn.__path__):
        theirs = getattr(torch, info.name, None)
        if theirs is not None and not isinstance(theirs, types.ModuleType):
            clashes.append(f"limn.{info.name} is a module, torch.{info.name} is a {type(theirs).__name__}")
    assert not clashes, "rename these modules so the name can be torch's function: " + "; ".join(clashes)


def test_einsum_at_module_level_is_torchs():
    a, b = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    got = limn.einsum("ij,kj->ik", Tensor(a), Tensor(b)).numpy()
    want = torch.einsum("ij,kj->ik", torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"limn.einsum('ij,kj->ik', a, b) with a={a!r} b={b!r}")


def test_dropout_at_module_level_is_torchs_when_it_keeps_everything():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for args in [(0.0, True), (0.5, False)]:
        got = limn.dropout(Tensor(x), *args).numpy()
        want = torch.dropout(torch.tensor(x), *args).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"limn.dropout(x, {args}) against torch.dropout")


def test_dropout_at_module_level_zeroes_and_rescales_as_torch():
    x = np.ones((64, 64), np.float32)
    got = limn.dropout(Tensor(x), 0.25, True).numpy()
    assert set(np.unique(got)) <= {0.0, np.float32(1 / 0.75)}, "kept values are scaled by 1 / (1 - p), as torch"
    assert 0.15 < (got == 0).mean() < 0.35, f"about p of the values are zeroed, got {(got == 0).mean():.3f}"


def test_scatter_at_module_level_is_torchs():
    x = np.zeros((2, 4), np.float32)
    index = np.array([[0, 3], [1, 2]])
    src = np.array([[1, 2], [3, 4]], np.float32)
    got = limn.scatter(Tensor(x), 1, Tensor(index), Tensor(src)).numpy()
    want = torch.scatter(torch.tensor(x), 1, torch.tensor(index), torch.tensor(src)).numpy()
    np.testing.assert_array_equal(got, want, err_msg=f"limn.scatter(x, 1, {index.tolist()}, {src.tolist()})")


@pytest.mark.parametrize("name", ["cat", "stack", "zeros", "exp", "where", "matmul", "softmax", "view"])
def test_torchs_module_level_names_are_functions(name):
    assert callable(getattr(limn, name)) and not isinstance(getattr(limn, name), types.ModuleType), name


def test_outer_is_torchs_and_refuses_what_torch_refuses():
    a, b = np.array([1.0, -2.0, 3.5], np.float32), np.array([4, 5], np.int32)
    for got in (Tensor(a).outer(Tensor(b)), limn.outer(Tensor(a), Tensor(b)), Tensor(a).ger(Tensor(b))):
        want = torch.outer(torch.tensor(a), torch.tensor(b))
        assert str(want.dtype).removeprefix("torch.") == got.dtype.name, "the promoted dtype is torch's"
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"outer({a.tolist()}, {b.tolist()})")
    with pytest.raises(RuntimeError, match=r"1-D tensors, got shapes \(3, 1\) and \(2,\)"):
        Tensor(a).reshape(3, 1).outer(Tensor(b))  # torch: "outer: Expected 1-D argument self"


@pytest.mark.parametrize("spelling", ["with", "with(False)", "decorator", "bare decorator", "decorator(False)"])
def test_inference_mode_turns_gradients_off_as_torchs(spelling):
    """limn.inference_mode is no_grad (limn has no version counters for it to skip); mode=False leaves the
    mode as it is; it decorates called or bare, as torch's. The oracle is torch's requires_grad."""

    def run(lib):
        x = lib.ones(2, requires_grad=True)
        mode = lib.inference_mode
        if spelling == "with":
            with mode():
                return (x * 2).requires_grad
        if spelling == "with(False)":
            with mode(False):
                return (x * 2).requires_grad
        wrap = {"decorator": mode(), "bare decorator": mode, "decorator(False)": mode(False)}[spelling]
        return wrap(lambda: (x * 2).requires_grad)()

    assert run(limn) == run(torch), f"inference_mode, {spelling}: limn {run(limn)}, torch {run(torch)}"
    assert limn.is_grad_enabled(), "the mode is restored afterwards"


def test_realize_names_an_argument_that_is_not_a_tensor():
    with pytest.raises(TypeError, match="argument 1 is NoneType"):
        limn.realize(Tensor([1.0]), None)


def test_device_names_a_device_as_torch_device_does():
    assert limn.device("numpy").name == "numpy"
    assert limn.device().name == limn.current_device()
    with pytest.raises(limn.DeviceError):
        limn.device("no-such-device")


def test_no_limn_module_writes_sys_modules():
    writes = []
    for path in ROOT.glob("packages/*/src/limn/**/*.py"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"sys\.modules\[[^]]*\]\s*=(?!=)", line):
                writes.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not writes, "a folder and an import say where a module lives, not sys.modules: " + "; ".join(writes)


def test_no_primitive_method_is_rebound():
    # a method the primitives' class body defines is the one a user calls: no mixin of Tensor's bases defines
    # the name again (gather, scatter_add, expand, add, size, to, pad were folded into the primitive or
    # renamed), so a reader who opens primitives.py reads what runs, and gradient rules reach the primitives
    import ast

    from limn.frontend import host, primitives

    rebound = []
    for module, name in ((primitives, "Primitives"), (host, "HostMixin")):
        tree = ast.parse(Path(module.__file__).read_text())
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name).body
        for method in (n.name for n in body if isinstance(n, ast.FunctionDef)):
            found = getattr(Tensor, method)
            function = getattr(found, "fget", found)
            if getattr(function, "__qualname__", None) != f"{name}.{method}":
                rebound.append(f"Tensor.{method} is {getattr(function, '__qualname__', function)}")
    assert not rebound, f"{module.__name__}'s methods replaced after the class: " + "; ".join(rebound)


def _names_defined_in_class_bodies() -> dict[str, type]:
    """name -> the first class of Tensor's MRO whose own body (its source) defines it: a def, or an
    assignment such as `arcsin = asin` or `add_ = in_place("add")`."""
    import ast
    import inspect
    import textwrap

    found: dict[str, type] = {}
    for cls in Tensor.__mro__[:-1]:  # object's attributes are python's
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
        for node in body:
            names = [node.name] if isinstance(node, ast.FunctionDef) else []
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if names == ["__slots__"]:  # the state: node, grad, requires_grad, ...
                    names = list(ast.literal_eval(node.value))
            for name in names:
                found.setdefault(name, cls)
    return found


def test_every_tensor_method_is_defined_in_a_class_body_a_tool_can_read():
    # step 2 of the redesign: no name is attached to Tensor after its class is built, so go-to-definition,
    # inspect.getsource and a type checker all land on the definition a user runs
    defined = _names_defined_in_class_bodies()
    attached = [
        name
        for name in dir(Tensor)
        if name not in dir(object) and name not in defined and not name.startswith("__") and name != "__weakref__"
    ]
    assert not attached, f"Tensor attributes no class body of its bases defines: {attached}"
    assert len(defined) > 400, f"only {len(defined)} names found: the walk over Tensor's bases is broken"


@pytest.mark.parametrize("name", ["softmax", "cross_entropy", "conv2d", "sum", "cumsum", "sort", "pad", "sin"])
def test_a_composed_method_is_its_own_definition(name):
    import inspect

    source = inspect.getsource(getattr(Tensor, name))
    assert re.match(rf"(\s*@.*\n)*\s*def {name}\(\s*self\b", source), (
        f"inspect.getsource(Tensor.{name}):\n{source[:300]}"
    )
