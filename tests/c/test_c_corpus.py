"""Rules for the c device, each against an oracle:
- the shared corpus on c matches the numpy device (1e-5 float32, 1e-12 float64, exact ints, and each
  half width's own rounding);
- threading changes which core computes a cell, not the cell: every nest threaded equals serial, bit for bit;
- splitting a masked innermost loop at the mask's edges changes nothing: split equals unsplit, bit for bit;
- the register-tiled matmul equals the plain nest, bit for bit, for every tile shape of the ISA table (edge
  tiles included), with its kernel's epilogue (bias, gelu, residual: limn.compiler.epilogue) after the tiles or in them;
- chunked and jammed folds equal plain folds, hoisting loop invariants equals computing them in the loop, and
  a register fold's epilogue in a loop of its own equals it in the fold's loop, bit for bit."""

import dataclasses

import numpy as np
import pytest
from corpus import CASES, Case, run_case, tolerance

import limn
from limn import Tensor
from limn.c import isa as c_isa
from limn.c.device import CDevice
from limn.c.toolchain import Toolchain
from limn.compiler.codegen import ir
from limn.runtime.device import DeviceError

limn.register_device("c_threads", lambda: CDevice(parallel_work=0))  # every nest that can, threaded
limn.register_device("c_serial", lambda: CDevice(threads=False))
limn.register_device("c_nosplit", lambda: CDevice(split_pads=False, parallel_work=0))
limn.register_device("c_notile", lambda: CDevice(tile_matmuls=False, parallel_work=0))
limn.register_device("c_nochunk", lambda: CDevice(chunk_folds=False, parallel_work=0))
limn.register_device("c_plainfold", lambda: CDevice(chunk_folds=False, jam_folds=False, parallel_work=0))
limn.register_device("c_nohoist", lambda: CDevice(hoist_invariants=False, parallel_work=0))


def _epilogues_unsplit() -> CDevice:
    """A threaded c device that leaves a register fold's epilogue in the fold's loop."""
    device = CDevice(parallel_work=0)
    device.options.split_epilogues = False
    return device


limn.register_device("c_unsplit_epilogues", _epilogues_unsplit)


def _tiled_as(isa: c_isa.ISA) -> CDevice:
    """A threaded c device whose tiles take another ISA row's shape (at this host's vector width)."""
    device = CDevice(parallel_work=0)
    device.options.isa = dataclasses.replace(device.options.isa, tile_rows=isa.tile_rows, tile_vectors=isa.tile_vectors)
    return device


TILE_SHAPES = sorted({(isa.tile_rows, isa.tile_vectors) for isa in c_isa.TABLE})


def _host_tile() -> tuple[int, int] | None:
    """The tile shape of the ISA row this machine's compiler builds for; None when no compiler works."""
    try:
        isa = Toolchain().isa
    except DeviceError:
        return None
    return isa.tile_rows, isa.tile_vectors


# The default suite runs the tile this machine's kernels use; `nox -s isa` (and CI) runs every other row's,
# which this machine compiles and runs just as well: the bit-exact test costs a cc run per tile and dtype.
HOST_TILE = _host_tile()
TILE_PARAMS = [
    pytest.param(tile, id=f"tile{tile[0]}x{tile[1]}", marks=() if tile == HOST_TILE else pytest.mark.isa)
    for tile in TILE_SHAPES
]
for _isa in c_isa.TABLE:
    _name = f"c_tile{_isa.tile_rows}x{_isa.tile_vectors}"
    limn.register_device(_name, lambda isa=_isa: _tiled_as(isa))


@pytest.mark.parametrize("switch", ["split_pads", "tile_matmuls", "chunk_folds", "jam_folds", "hoist_invariants"])
def test_each_rewrite_switch_reaches_the_renderer(switch: str):
    # a switch dropped on the way would leave its bit-for-bit test below comparing the rewrite with itself
    assert getattr(CDevice(**{switch: False}).renderer.options, switch) is False


def on(device: str, case: Case) -> list[np.ndarray]:
    limn.set_device(device)
    return run_case(case)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, except that any NaN equals any NaN: IEEE 754 leaves which operand's NaN an op passes on
    to the implementation, and a compiler may swap a commutative op's operands (x86 then returns the other
    one's sign), so a NaN's sign and payload are not part of the answer."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
        nan = np.isnan(wide_a)
        if not np.array_equal(nan, np.isnan(wide_b)):
            return False
        a, b = np.where(nan, 0, a), np.where(nan, 0, b)
    return a.tobytes() == b.tobytes()


@pytest.mark.isa  # the default suite diffs the whole corpus on c in tests/test_backend_corpus.py
@pytest.mark.parametrize("case", CASES, ids=str)
def test_c_matches_numpy_device(case: Case):
    # beside test_backend_corpus's diff: dtypes and shapes exact, and a reproducer for the c device
    expected, got = on("numpy", case), on("c", case)
    rtol, atol = tolerance(case.dtypes[0])
    for i, (e, g) in enumerate(zip(expected, got)):
        assert g.dtype == e.dtype and g.shape == e.shape, f"{case} output {i}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
        if e.dtype.kind == "f" or e.dtype.name == "bfloat16":
            ok = np.allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(g, e)
        assert ok, f"{case} output {i} differs from numpy\nexpected:\n{e}\ngot:\n{g}\n" + _reproducer(case)


def _sixth_in_default(cases: list[Case]) -> list:
    """The cases, five in six marked isa: the default suite runs a sixth of the corpus through a rewrite's
    bit-for-bit test (each case compiles twice more), `nox -s isa` (and CI) the rest."""
    return [pytest.param(c, id=str(c), marks=pytest.mark.isa if i % 6 else ()) for i, c in enumerate(cases)]


@pytest.mark.parametrize("case", _sixth_in_default(CASES))
def test_threaded_nests_equal_serial_bit_for_bit(case: Case):
    serial, threaded = on("c_serial", case), on("c_threads", case)
    for i, (s, t) in enumerate(zip(serial, threaded)):
        assert _same_bits(s, t), f"{case} output {i}: threaded differs from serial\n" + _reproducer(case)


@pytest.mark.parametrize("case", [c for c in CASES if "pad" in c.name or "indexing" in c.name], ids=str)
def test_split_pads_equal_unsplit_bit_for_bit(case: Case):
    unsplit, split = on("c_nosplit", case), on("c_threads", case)
    for i, (u, s) in enumerate(zip(unsplit, split)):
        assert _same_bits(u, s), f"{case} output {i}: split differs from unsplit\n" + _reproducer(case)


FOLDS = [c for c in CASES if any(key in c.name for key in ("softmax", "reduce_of_expression", "autograd"))]


@pytest.mark.parametrize("case", _sixth_in_default(FOLDS + [c for c in CASES if c.name.startswith("reduces")]))
def test_chunked_and_jammed_folds_equal_plain_folds_bit_for_bit(case: Case):
    plain, chunked = on("c_plainfold", case), on("c_threads", case)
    for i, (p, c) in enumerate(zip(plain, chunked)):
        assert _same_bits(p, c), f"{case} output {i}: chunked fold differs from the plain one\n" + _reproducer(case)


@pytest.mark.parametrize("case", _sixth_in_default(FOLDS + [c for c in CASES if c.name.startswith("reduces")]))
def test_split_epilogues_equal_unsplit_bit_for_bit(case: Case):
    # these cases' reduces carry epilogues (limn.compiler.epilogue): a loop of their own computes the same values
    unsplit, split = on("c_unsplit_epilogues", case), on("c_threads", case)
    for i, (u, s) in enumerate(zip(unsplit, split)):
        assert _same_bits(u, s), f"{case} output {i}: splitting the epilogue changed it\n" + _reproducer(case)


# the cases whose nests hoist something: reductions beside broadcast values, wrapping int arithmetic, scatters
HOISTS = ("reduces", "softmax", "reduce_of_expression", "permute_and_reshape", "int_wraparound", "scatter", "autograd")


@pytest.mark.parametrize("case", _sixth_in_default([c for c in CASES if any(key in c.name for key in HOISTS)]))
def test_hoisted_invariants_equal_unhoisted_bit_for_bit(case: Case):
    unhoisted, hoisted = on("c_nohoist", case), on("c_threads", case)
    for i, (u, h) in enumerate(zip(unhoisted, hoisted)):
        assert _same_bits(u, h), f"{case} output {i}: hoisting changed the numbers\n" + _reproducer(case)


MATMULS = {
    "a @ b": lambda a, b: a @ b,  # the memory form: loops i, r, j after a fill
    "a @ b.T": lambda a, b: a @ b.T.contiguous().T,  # b read across rows: the register form, a gathered panel
    "batched": lambda a, b: a.unsqueeze(0).expand(3, *a.shape) @ b,
    # a batch of a over one b: the batch folds into a's rows (the packed form)
    "rows of a batch": lambda a, b: Tensor.stack([a, a * 2]).contiguous() @ b,
}


def _bias_gelu(a: Tensor, b: Tensor, bias: Tensor, res: Tensor) -> list[Tensor]:
    h = a @ b.T.contiguous().T + bias  # the register form; the pre-activation kept beside the activation
    return [h, h.gelu()]


# matmuls whose elementwise consumer folds into the matmul's kernel (limn.compiler.epilogue): the tile applies it
EPILOGUES = {
    "a @ b + bias": lambda a, b, bias, res: [a @ b + bias],
    "gelu(a @ b.T + bias), both": _bias_gelu,
    "a @ b + residual": lambda a, b, bias, res: [res + a @ b],
    "batched + bias": lambda a, b, bias, res: [a.unsqueeze(0).expand(3, *a.shape) @ b + bias],
    "rows of a batch + residual": lambda a, b, bias, res: [Tensor.stack([a, a * 2]).contiguous() @ b + res],
}


# 600: 2 r blocks; 17, 23, 9: rows left below the last full tile; 70, 33, 31, 45: a partial panel;
# 300: a block of 256 columns and a partial one
TILE_TEST_SHAPES = [(8, 32, 32), (17, 13, 70), (64, 5, 33), (1, 40, 100), (9, 64, 31), (16, 600, 64), (23, 600, 45),
                    (20, 40, 300)]  # fmt: skip
# the default suite runs float32 on the shapes with edges in both directions and two r blocks; float64 tiles
# hold half the lanes of float32's, the same code otherwise, so it gets one of them; `nox -s isa` runs every
# shape in both
FLOAT32_DEFAULT_SHAPES = {(17, 13, 70), (23, 600, 45)}
FLOAT64_DEFAULT_SHAPES = {(17, 13, 70)}


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        pytest.param(
            shape,
            dtype,
            marks=()
            if shape in (FLOAT32_DEFAULT_SHAPES if dtype == "float32" else FLOAT64_DEFAULT_SHAPES)
            else pytest.mark.isa,
        )
        for shape in TILE_TEST_SHAPES
        for dtype in ("float32", "float64")
    ],
)
@pytest.mark.parametrize("tile", TILE_PARAMS)
def test_tiled_matmul_equals_plain_nest_bit_for_bit(shape, dtype, tile):
    # every form in one realize, epilogues too: one library per device, so the cold-cache cost stays one cc run
    n, k, m = shape
    rng = np.random.default_rng(1)
    a_np, b_np = rng.standard_normal((n, k)), rng.standard_normal((k, m))
    bias_np, res_np = rng.standard_normal(m), rng.standard_normal((n, m))
    results = {}
    tiled = f"c_tile{tile[0]}x{tile[1]}"
    for device in ("c_notile", tiled, "numpy"):
        limn.set_device(device)
        a, b = Tensor(a_np, dtype=dtype), Tensor(b_np, dtype=dtype)
        bias, res = Tensor(bias_np, dtype=dtype), Tensor(res_np, dtype=dtype)
        forms = {form: [make(a, b)] for form, make in MATMULS.items()}
        forms |= {form: make(a, b, bias, res) for form, make in EPILOGUES.items()}
        if device.startswith(tiled) and n >= 8 and m >= 32:
            for form, outs in forms.items():
                source = "".join(limn.get_device().render(k) for k in ir(*outs).kernels)
                assert "matmul tile" in source, f"{form} {shape} was not tiled"
        outs = [out for outs in forms.values() for out in outs]
        limn.realize(*outs)
        results[device] = [out.numpy() for out in outs]
    limn.set_device("numpy")
    rtol = 1e-5 if dtype == "float32" else 1e-12
    # a long sum that cancels keeps its absolute error, not its relative one: allow it per term summed
    atol = rtol * max(1.0, k / 32)
    names = [f"{form} output {i}" for form, outs in forms.items() for i in range(len(outs))]
    for form, plain, got, expected in zip(names, results["c_notile"], results[tiled], results["numpy"]):
        assert _same_bits(plain, got), f"{tiled} matmul {form} {shape} {dtype} differs from the plain nest"
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=f"{form} {shape} {dtype} {tiled}")


def _reproducer(case: Case) -> str:
    return (
        "reproduce with:\n"
        "  import sys; sys.path.insert(0, 'tests'); import limn; from corpus import CASES, run_case\n"
        f"  case = next(c for c in CASES if c.name == {case.name!r})\n"
        "  limn.set_device('numpy'); print(run_case(case)); limn.set_device('c'); print(run_case(case))\n"
        "  print(limn.compiler.codegen.ir(*case.build(__import__('numpy').random.default_rng(0))))"
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.softmax(-1),
        lambda x: (x * 0.5).exp().sum(1),
        lambda x: x.logsumexp(1),
        lambda x: (x * x + 1).sqrt().max(axis=1),
    ],
    ids=["softmax", "exp-sum", "logsumexp", "sqrt-max"],
)
def test_chunked_folds_on_long_rows_equal_plain_folds_and_numpy(make):
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((13, 70)).astype(np.float32)  # 13 rows: 8 jammed and 5 more; 70: chunks and a tail
    results = {}
    for device in ("c_plainfold", "c_threads"):
        limn.set_device(device)
        out = make(Tensor(x_np))
        if device == "c_threads":
            source = "".join(limn.get_device().render(k) for k in ir(out).kernels)
            assert "_chunk" in source or "_7 = " in source, "the fold was neither chunked nor jammed"
        results[device] = out.numpy()
    assert _same_bits(results["c_plainfold"], results["c_threads"])
    limn.set_device("numpy")
    np.testing.assert_allclose(results["c_threads"], make(Tensor(x_np)).numpy(), rtol=1e-5, atol=1e-6)
