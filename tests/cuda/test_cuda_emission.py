"""Every kernel the CUDA renderer writes for the shared corpus and for a GPT training step (forward, loss and
every gradient) compiles through NVRTC (the nvidia-cuda-nvrtc wheel; no GPU needed) to a CUBIN for sm_80 and
sm_90, and ptxas's report for each function shows no register spills and static shared memory within the
architecture's 48 KiB. A kernel's programs are compiled a test case at a time, in one translation unit, as
the cuda-sim device builds them. Marked `cuda` (a sweep of a few minutes): nox -s "tests(cuda-sim)" runs it."""

from __future__ import annotations

import numpy as np
import pytest
from corpus import CASES, Case

import limn
from limn import Tensor, nn
from limn.compiler.codegen import ir
from limn.cuda.prelude import PRELUDE
from limn.cuda.source import FOLD_BLOCK, LONG_FOLD, CudaRenderer

cuda_nvrtc = pytest.importorskip("limn.cuda.nvrtc")
try:
    cuda_nvrtc.nvrtc_version()
except limn.DeviceError as e:  # pragma: no cover - the wheel is a dev dependency
    pytest.skip(f"needs NVRTC (pip install limn-cuda[nvrtc]): {e}", allow_module_level=True)

pytestmark = pytest.mark.cuda
ARCHS = (80, 90)
SHARED_LIMIT = 48 * 1024  # static shared memory a block may declare on sm_80 and sm_90


def unit_of(*tensors: Tensor) -> tuple[str, set[str]]:
    """One translation unit holding every kernel of the graph, and the names of its functions."""
    renderer, bodies, names = CudaRenderer(), [], set()
    for kernel in ir(*tensors).kernels:
        if kernel.custom is None:
            program = renderer.render(kernel)
            bodies.append(program.source[len(PRELUDE) :])
            names |= {launch.name for launch in program.launches}
    return PRELUDE + "".join(bodies), names


def check_compiles(source: str, names: set[str], what: str) -> None:
    for arch in ARCHS:
        compiled = cuda_nvrtc.compile(source, f"{what}.cu", arch, True)
        report = {r.name: r for r in compiled.resources.values() if r.entry}
        assert names <= set(report), f"{what} sm_{arch}: ptxas reported {sorted(report)}, not {sorted(names)}"
        for name in names:
            r = report[name]
            assert r.spill_store_bytes == 0 and r.spill_load_bytes == 0, f"{what} sm_{arch}: {name} spills: {r}"
            assert r.shared_bytes <= SHARED_LIMIT, f"{what} sm_{arch}: {name} declares {r.shared_bytes} B shared"


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_corpus_kernel_compiles_for_sm80_and_sm90_without_spills(case: Case):
    limn.set_device("numpy")
    source, names = unit_of(*case.build(np.random.default_rng(0)))
    if names:  # a case whose outputs are views of its inputs runs no kernel
        check_compiles(source, names, case.name.replace("[", "_").replace("]", ""))


def test_a_gpt_training_steps_kernels_compile_for_sm80_and_sm90_without_spills():
    limn.set_device("numpy")
    limn.manual_seed(0)
    vocab, d, heads, t = 64, 32, 4, 16
    emb, pos = nn.Embedding(vocab, d), nn.Embedding(t, d)
    ln1, ln2, lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
    qkv, proj, fc, out, head = (
        nn.Linear(d, 3 * d),
        nn.Linear(d, d),
        nn.Linear(d, 4 * d),
        nn.Linear(4 * d, d),
        nn.Linear(d, vocab),
    )
    idx = Tensor(np.random.default_rng(1).integers(0, vocab, (2, t)).astype(np.int32))
    x = emb(idx) + pos(Tensor(np.arange(t, dtype=np.int32)))  # (B, T, C)
    q, k, v = qkv(ln1(x)).reshape(2, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)  # each (B, nh, T, hs)
    y = Tensor.scaled_dot_product_attention(q, k, v, causal=True).permute(0, 2, 1, 3).reshape(2, t, d)
    x = x + proj(y)
    x = x + out(fc(ln2(x)).gelu())
    loss = head(lnf(x)).reshape(2 * t, vocab).cross_entropy(idx.reshape(2 * t))
    params = [p for m in (emb, pos, ln1, ln2, lnf, qkv, proj, fc, out, head) for _, p in nn.named_parameters(m)]
    loss.backward()
    source, names = unit_of(loss, *(p.grad for p in params))
    assert len(names) > 20, "a training step is dozens of kernels"
    check_compiles(source, names, "gpt_step")


def test_the_long_fold_shape_compiles_for_sm80_and_sm90_without_spills():
    """Row sums, maxima and a log-sum-exp over LONG_FOLD terms, each a block per row with a tree in shared memory."""
    limn.set_device("numpy")
    x = Tensor(np.random.default_rng(2).random((3, LONG_FOLD)).astype(np.float32))
    source, names = unit_of(x.sum(1), x.max(axis=1), (x - x.max(axis=1, keepdim=True)).exp().sum(1).log())
    assert f"partial[{FOLD_BLOCK}]" in source
    check_compiles(source, names, "long_folds")
