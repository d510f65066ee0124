"""limn.distributed.nccl (NCCL through ctypes) and limn.distributed.transport.choose: the binding against the wheel's own nccl.h
and version, the device buckets on the numpy device, every branch of the chooser with its probes replaced, and
a 1-rank NCCL allreduce on the cuda device (skipped with "no CUDA device" where there is none)."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import limn
from limn import distributed
from limn.distributed import nccl as dist_nccl
from limn.distributed import transport as dist_transport
from limn.runtime.device import DeviceError
from limn.distributed.buckets import DistributedError
from limn.frontend.tensor import Tensor

WHEEL = "nvidia-nccl-cu13"


def wheel_version() -> tuple[int, int, int]:
    try:
        text = metadata.version(WHEEL)
    except metadata.PackageNotFoundError:
        pytest.skip(f"the {WHEEL} wheel is not installed (limn-dist[nccl])")
    return tuple(int(part) for part in text.split(".")[:3])


def nccl_header() -> str:
    """The wheel's nccl.h: the oracle for the enums (the binding spells them out by hand)."""
    wheel_version()
    header = Path(dist_nccl.library_path()).parent.parent / "include" / "nccl.h"
    if not header.is_file():
        pytest.skip(f"the {WHEEL} wheel has no include/nccl.h at {header}")
    return header.read_text()


def header_enum(text: str, typedef: str) -> dict[str, int]:
    """name -> value of the `typedef enum { ... } typedef;` block in nccl.h (decimal values only)."""
    block = re.search(r"typedef enum \{([^}]*)\}\s*" + typedef + ";", text)
    assert block is not None, f"nccl.h has no enum {typedef}"
    return {name: int(value) for name, value in re.findall(r"(nccl\w+)\s*=\s*(\d+)\b", block.group(1))}


@pytest.fixture(autouse=True)
def _choose_afresh(monkeypatch):
    monkeypatch.setattr(dist_transport, "_chosen", {})  # choose() caches per device: each test decides anew


# ---- the binding ----


def test_libnccl_loads_from_the_wheels_package_directory():
    wheel_version()
    path = Path(dist_nccl.library_path())
    assert path.name == "libnccl.so.2" and path.parent.parent.name == "nccl", path
    assert dist_nccl.load().ncclGetVersion is not None


def test_ncclGetVersion_is_the_wheels_version_and_at_least_2_20():
    expected = wheel_version()
    assert dist_nccl.version() == expected
    assert dist_nccl.version() >= dist_nccl.MIN_VERSION


def test_version_codes_decode_as_nccl_h_encodes_them():
    text = nccl_header()
    parts = [int(re.search(rf"#define NCCL_{part} (\d+)", text).group(1)) for part in ("MAJOR", "MINOR", "PATCH")]
    code = int(re.search(r"#define NCCL_VERSION_CODE (\d+)", text).group(1))
    assert dist_nccl.decode_version(code) == tuple(parts)
    # the old spelling, X*1000 + Y*100 + Z, for 2.8 and older: NCCL 2.8.4's code was 2804
    assert dist_nccl.decode_version(2804) == (2, 8, 4)
    assert dist_nccl.decode_version(21003) == (2, 10, 3)


def test_ncclGetUniqueId_gives_128_fresh_bytes_without_a_gpu():
    wheel_version()
    first, second = dist_nccl.unique_id(), dist_nccl.unique_id()
    assert len(first) == len(second) == 128
    assert first != second  # each id names a new communicator (a random magic and a bootstrap address)


def test_enum_values_match_nccl_h():
    text = nccl_header()
    data_types = header_enum(text, "ncclDataType_t")
    spelled = {
        "int8": "ncclInt8",
        "uint8": "ncclUint8",
        "int32": "ncclInt32",
        "uint32": "ncclUint32",
        "int64": "ncclInt64",
        "uint64": "ncclUint64",
        "float16": "ncclFloat16",
        "float32": "ncclFloat32",
        "float64": "ncclFloat64",
        "bfloat16": "ncclBfloat16",
    }
    assert {name: data_types[spelled[name]] for name in dist_nccl.DATA_TYPES} == dist_nccl.DATA_TYPES
    ops = header_enum(text, "ncclRedOp_t")
    op_names = {"sum": "ncclSum", "prod": "ncclProd", "max": "ncclMax", "min": "ncclMin", "mean": "ncclAvg"}
    assert {name: ops[op_names[name]] for name in dist_nccl.RED_OPS} == dist_nccl.RED_OPS
    results = header_enum(text, "ncclResult_t")
    assert {value: name for name, value in results.items() if name != "ncclNumResults"} == dist_nccl.RESULTS
    assert int(re.search(r"#define NCCL_UNIQUE_ID_BYTES (\d+)", text).group(1)) == dist_nccl.UNIQUE_ID_BYTES


def test_result_codes_decode_to_ncclGetErrorStrings_text():
    wheel_version()
    # NCCL's own words for each code (nccl's src/misc/utils: ncclGetErrorString)
    expected = {0: "no error", 1: "unhandled cuda error", 4: "invalid argument", 5: "invalid usage", 8: "timeout"}
    for code, text in expected.items():
        assert dist_nccl.error_string(code).startswith(text), (code, dist_nccl.error_string(code))


def test_a_failing_call_raises_naming_the_call_the_result_and_ncclGetLastError():
    wheel_version()
    code = dist_nccl.load().ncclAllReduce(None, None, 1, dist_nccl.DATA_TYPES["float32"], 0, None, None)
    with pytest.raises(dist_nccl.NcclError) as caught:
        dist_nccl.check(code, "ncclAllReduce(1 x float32, sum)")
    message = str(caught.value)
    assert "ncclAllReduce(1 x float32, sum)" in message and "ncclInvalidArgument (4)" in message
    assert "invalid argument" in message and "comm argument is NULL" in message  # NCCL's last error


def test_dtypes_nccl_has_no_type_for_are_refused_by_name():
    with pytest.raises(DistributedError, match="NCCL has no type for int16"):
        dist_nccl.nccl_type(np.dtype(np.int16), "all_reduce('sum')")


def test_missing_wheel_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvidia.nccl", None)  # `import nvidia.nccl` raises ImportError
    monkeypatch.setattr(dist_nccl.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(dist_nccl.NcclUnavailable, match=r"NCCL not installed \(limn-dist\[nccl\]\)"):
        dist_nccl.library_path()


# ---- device buckets, on numpy and c (limn kernels: the same graphs the cuda device compiles) ----


@pytest.fixture(params=["numpy", "c"])
def bucket_device(request):
    try:
        limn.set_device(request.param)
    except DeviceError as e:
        pytest.skip(f"device {request.param!r} cannot run here: {e}")
    return request.param


def test_pack_lays_each_tensor_at_its_slot_in_a_fresh_buffer_and_unpack_gives_them_back(bucket_device):
    tensors = [
        Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).realize(),
        Tensor(np.array([1.5, -2.0], dtype=np.float16)).realize(),  # wire float32, as on the host path
        Tensor(np.array([7.0], dtype=np.float32)).realize(),
    ]
    buckets = dist_nccl.plan(tensors, 1 << 20, "all_reduce('sum')")
    assert [(bucket.wire.name, kind) for bucket, kind in buckets] == [("float32", 7)]
    bucket = buckets[0][0]
    flat = dist_nccl.pack(bucket, tensors)
    expected = np.concatenate([t.numpy().reshape(-1).astype(np.float32) for t in tensors])
    np.testing.assert_array_equal(flat.numpy(), expected)
    assert all(flat.node.arg.handle is not t.node.arg.handle for t in tensors)
    back = dist_nccl.unpack(bucket, flat, tensors)
    for i, t in enumerate(tensors):
        assert back[i].dtype == t.dtype and back[i].shape == t.shape
        np.testing.assert_array_equal(back[i].numpy(), t.numpy())


def test_a_one_tensor_bucket_is_still_a_copy_the_collective_may_write(bucket_device):
    t = Tensor(np.arange(4, dtype=np.float32)).realize()
    bucket = dist_nccl.plan([t], 1 << 20, "all_reduce('sum')")[0][0]
    flat = dist_nccl.pack(bucket, [t])
    flat.node.arg.handle[:] = -1  # what a collective writing in place does to the bucket
    np.testing.assert_array_equal(t.numpy(), np.arange(4, dtype=np.float32))


# ---- the chooser ----


def fake_gpu(name: str = "cuda") -> SimpleNamespace:
    """A device object as the chooser reads one: not host, a CUDA stream and driver, a CUdevice."""
    return SimpleNamespace(name=name, host=False, stream=object(), driver=object(), device=0)


class FakeComm:
    """mpi4py's allgather for rank 0 of a world of two, with rank 1's contributions given in order."""

    def __init__(self, *theirs: tuple) -> None:
        self.theirs = list(theirs)

    def allgather(self, ours: tuple) -> list[tuple]:
        return [ours, self.theirs.pop(0)]


@pytest.fixture
def gpu_ready(monkeypatch):
    """Rank 0 of a world as asked, with a GPU and NCCL 2.30.7: each test then takes away one thing."""
    monkeypatch.setattr(dist_transport, "get_device", lambda name: fake_gpu(name))
    monkeypatch.setattr(dist_nccl, "version", lambda: (2, 30, 7))
    monkeypatch.setattr(dist_transport, "_world", lambda: None)
    monkeypatch.setattr(dist_transport, "_bus_id", lambda dev: "0000:1B:00.0")

    def world_of_two(*theirs: tuple) -> None:
        world = SimpleNamespace(comm=FakeComm(*theirs), rank=0, size=2)
        monkeypatch.setattr(dist_transport, "_world", lambda: world)

    return world_of_two


@pytest.mark.parametrize("device", ["numpy", "c"])
def test_host_devices_let_mpi_read_their_buffers(device):
    try:
        limn.get_device(device)
    except DeviceError as e:
        pytest.skip(f"device {device!r} cannot run here: {e}")
    chosen = dist_transport.choose(device)
    assert (chosen.name, chosen.reason) == ("host", "MPI reads the host buffers directly")
    assert dist_transport.describe(device) == f"{device}: MPI reads the host buffers directly"


def test_cuda_that_does_not_start_is_staged_saying_there_is_no_gpu(monkeypatch):
    def no_driver(name):
        raise DeviceError("no CUDA driver: libcuda could not be loaded")

    monkeypatch.setattr(dist_transport, "get_device", no_driver)
    monkeypatch.setattr(dist_transport, "_world", lambda: None)
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "staged" and chosen.reason.startswith("no GPU: device 'cuda' did not start")
    assert dist_transport.describe("cuda").startswith("cuda: MPI with host staging")
    assert "no CUDA driver" in dist_transport.describe("cuda")


def test_a_gpu_with_nccl_in_a_world_of_one_goes_through_nccl(gpu_ready):
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "nccl"
    assert dist_transport.describe("cuda").startswith("cuda: NCCL between the GPUs")


def test_without_the_nccl_wheel_cuda_is_staged_saying_what_to_install(gpu_ready, monkeypatch):
    def missing():
        raise dist_nccl.NcclUnavailable("NCCL not installed (limn-dist[nccl]): no libnccl")

    monkeypatch.setattr(dist_nccl, "version", missing)
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "staged" and chosen.reason.startswith("NCCL not installed (limn-dist[nccl])")


def test_an_nccl_older_than_2_20_is_staged_naming_its_version(gpu_ready, monkeypatch):
    monkeypatch.setattr(dist_nccl, "version", lambda: (2, 18, 3))
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "staged" and chosen.reason.startswith("NCCL 2.18.3 is older than 2.20")


def test_a_device_off_the_host_without_a_cuda_stream_is_staged_saying_no_gpu(gpu_ready, monkeypatch):
    monkeypatch.setattr(dist_transport, "get_device", lambda name: SimpleNamespace(name=name, host=False))
    chosen = dist_transport.choose("elsewhere")
    assert chosen.name == "staged" and chosen.reason.startswith("no GPU: device 'elsewhere'")


def test_one_rank_without_nccl_sends_every_rank_to_staging(gpu_ready):
    gpu_ready(("NCCL not installed (limn-dist[nccl]): no libnccl", "node-b", None))
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "staged" and chosen.reason.startswith("rank 1: NCCL not installed")


def test_two_ranks_on_one_gpu_are_staged_naming_both(gpu_ready, monkeypatch):
    gpu_ready((None, "node-a", "0000:1B:00.0"))
    monkeypatch.setattr(dist_transport.socket, "gethostname", lambda: "node-a")
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "staged" and chosen.reason.startswith("ranks 0 and 1 share the GPU at 0000:1B:00.0")


def test_gpus_on_one_host_that_cannot_access_each_other_are_staged(gpu_ready, monkeypatch):
    gpu_ready((None, "node-a", "0000:2C:00.0"), (None,))
    monkeypatch.setattr(dist_transport.socket, "gethostname", lambda: "node-a")
    monkeypatch.setattr(dist_transport, "_device_by_bus", lambda dev, bus: 1)
    monkeypatch.setattr(dist_transport, "_can_access", lambda dev, a, b: False)
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "staged" and chosen.reason.startswith("rank 0: GPUs cannot reach each other")
    assert "0000:1B:00.0" in chosen.reason and "0000:2C:00.0" in chosen.reason


def test_gpus_on_one_host_with_peer_access_go_through_nccl(gpu_ready, monkeypatch):
    gpu_ready((None, "node-a", "0000:2C:00.0"), (None,))
    monkeypatch.setattr(dist_transport.socket, "gethostname", lambda: "node-a")
    monkeypatch.setattr(dist_transport, "_device_by_bus", lambda dev, bus: 1)
    monkeypatch.setattr(dist_transport, "_can_access", lambda dev, a, b: True)
    assert dist_transport.choose("cuda").name == "nccl"


def test_ranks_on_other_hosts_are_left_to_nccl(gpu_ready, monkeypatch):
    gpu_ready((None, "node-b", "0000:1B:00.0"), (None,))  # the same bus id, on another machine
    monkeypatch.setattr(dist_transport.socket, "gethostname", lambda: "node-a")

    def looked_up(dev, bus):
        raise AssertionError("a GPU on another host was looked up on this one")

    monkeypatch.setattr(dist_transport, "_device_by_bus", looked_up)
    assert dist_transport.choose("cuda").name == "nccl"


def test_a_rank_that_finds_its_peer_unreachable_decides_for_all(gpu_ready, monkeypatch):
    gpu_ready((None, "node-a", "0000:2C:00.0"), ("GPUs cannot reach each other: 0000:2C:00.0 and ...",))
    monkeypatch.setattr(dist_transport.socket, "gethostname", lambda: "node-a")
    monkeypatch.setattr(dist_transport, "_device_by_bus", lambda dev, bus: None)  # rank 0 cannot see it
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "staged" and chosen.reason.startswith("rank 1: GPUs cannot reach each other")


# ---- on a GPU ----


@pytest.fixture
def cuda_with_nccl():
    try:
        limn.get_device("cuda")
    except DeviceError as e:
        pytest.skip(f"no CUDA device: {e}")
    wheel_version()
    distributed.init()
    limn.set_device("cuda")
    chosen = dist_transport.choose("cuda")
    assert chosen.name == "nccl", chosen.sentence
    return chosen


def test_a_one_rank_nccl_allreduce_on_the_cuda_device_leaves_each_rank_its_own_values(cuda_with_nccl):
    rng = np.random.default_rng(0)
    values = {
        "w": rng.standard_normal((3, 5)).astype(np.float32),
        "h": rng.standard_normal(7).astype(np.float16),
        "n": np.arange(4, dtype=np.int32),
        "b": np.array([True, False, True]),
    }
    tensors = {name: Tensor(v, device="cuda") for name, v in values.items()}
    distributed.all_reduce({n: t for n, t in tensors.items() if n != "b"}, op="sum", bucket_bytes=64)
    distributed.all_reduce({"b": tensors["b"]}, op="max")
    for name, v in values.items():  # a sum over a world of one is the rank's own value, bit for bit
        np.testing.assert_array_equal(tensors[name].numpy(), v)
    means = distributed.all_reduce([Tensor(values["w"], device="cuda")], op="mean")
    np.testing.assert_array_equal(means[0].numpy(), values["w"])


# ---- the seam: the collectives write back what a device path returns ----


class DoublingTransport:
    """Stands for NCCL between two ranks holding equal values: the device buckets, each doubled in place."""

    def all_reduce(self, tensors, op, bucket_bytes):
        out = {}
        for bucket, _ in dist_nccl.plan(tensors, bucket_bytes, f"all_reduce({op!r})"):
            flat = dist_nccl.pack(bucket, tensors)
            flat.node.arg.handle *= 2  # the collective, in place in the bucket's buffer
            out |= dist_nccl.unpack(bucket, flat, tensors)
        return out


def test_all_reduce_and_data_parallel_write_back_a_device_paths_tensors(monkeypatch):
    from limn.distributed.parallel import DataParallel

    distributed.init()
    monkeypatch.setattr(dist_transport, "device_path", lambda tensors: DoublingTransport())
    x = Tensor(np.array([1.0, -2.0, 3.0], dtype=np.float32))
    distributed.all_reduce([x], op="sum", bucket_bytes=8)
    np.testing.assert_array_equal(x.numpy(), [2.0, -4.0, 6.0])
    w = Tensor(np.array([0.5, 1.5], dtype=np.float32), requires_grad=True)
    parallel = DataParallel({"w": w})
    for step in range(2):  # the first step makes the kept gradient tensor, the second assigns into it
        (w * w).sum().backward()
        parallel.reduce_gradients()
        np.testing.assert_array_equal(w.grad.numpy(), 2 * 2 * w.numpy(), err_msg=f"step {step}")
        w.grad = None


def test_data_parallel_on_the_cuda_device_averages_through_nccl(cuda_with_nccl):
    from limn.distributed.parallel import DataParallel

    w = Tensor(np.array([0.5, -1.5, 2.0], dtype=np.float32), device="cuda", requires_grad=True)
    parallel = DataParallel({"w": w})
    for step in range(2):  # the mean over a world of one is the rank's own gradient, d(sum w^2)/dw = 2w
        (w * w).sum().backward()
        parallel.reduce_gradients()
        np.testing.assert_allclose(w.grad.numpy(), 2 * w.numpy(), rtol=0, atol=0, err_msg=f"step {step}")
        w.grad = None


def test_a_choice_made_before_init_is_made_again_with_the_world(gpu_ready):
    assert dist_transport.choose("cuda").name == "nccl"  # before init(): this rank alone
    gpu_ready(("NCCL not installed (limn-dist[nccl]): no libnccl", "node-b", None))
    assert dist_transport.choose("cuda").reason.startswith("rank 1: NCCL not installed")


CHOOSE_ON_TWO_RANKS = """
import sys
from pathlib import Path
from limn import distributed
from limn.distributed import transport as dist_transport
distributed.init()
said = [dist_transport.describe("numpy"), dist_transport.describe("cuda")]
Path(sys.argv[1], f"rank{distributed.rank()}.txt").write_text("\\n".join(said))
"""  # each rank writes a file of its own: mpiexec may run the ranks' stdout lines together


@pytest.mark.dist
def test_two_ranks_choose_alike_through_mpis_allgather(tmp_path):
    import subprocess

    script = tmp_path / "choose.py"
    script.write_text(CHOOSE_ON_TWO_RANKS)
    run = subprocess.run(
        [distributed.mpiexec(), "-n", "2", sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    said = [(tmp_path / f"rank{r}.txt").read_text().split("\n") for r in (0, 1)]
    assert said[0] == said[1], f"the ranks chose differently: {said}"
    assert said[0][0] == "numpy: MPI reads the host buffers directly"
    cuda = said[0][1]
    try:
        limn.get_device("cuda")
    except DeviceError:  # no GPU here: both ranks' findings gathered, rank 0's reported
        assert cuda.startswith(f"cuda: {dist_transport.STAGED}: rank 0: no GPU"), cuda
    else:  # one GPU for two ranks (NCCL refuses that), or a GPU each
        assert "share the GPU" in cuda or cuda.startswith(f"cuda: {dist_transport.NCCL}"), cuda
