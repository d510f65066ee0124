"""limn.serialize against the safetensors library: every dtype both ways, byte-identical files, torch's
layouts, load_into writing into the tensors' own buffers in one realize(), every malformed file refused
with SafetensorsError, atomic saves, and a reader fuzz whose only escape is SafetensorsError.

The oracle is the library (and torch through it): a round trip through limn alone would pass with a
wrong header length or a swapped dtype tag.
"""

from __future__ import annotations

import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch

import limn
from limn import Tensor, serialize
from limn.graph.ops import Op
from limn.serialize import SafetensorsError, load, load_into, load_numpy, read_metadata, save

# one row per dtype limn has: its safetensors tag, numpy dtype, torch dtype, and values with its edge cases
DTYPES: dict[str, tuple[np.dtype, torch.dtype, list[Any]]] = {
    "F64": (np.dtype(np.float64), torch.float64, [0.0, -0.0, 1e-300, -1.5, np.inf, -np.inf, np.nan, 1e308]),
    "F32": (np.dtype(np.float32), torch.float32, [0.0, -0.0, 1e-40, -1.5, np.inf, -np.inf, np.nan, 3e38]),
    "F16": (np.dtype(np.float16), torch.float16, [0.0, -0.0, 6e-8, -1.5, np.inf, -np.inf, np.nan, 65504.0]),
    "BF16": (
        np.dtype(ml_dtypes.bfloat16),
        torch.bfloat16,
        [0.0, -0.0, 1e-40, -1.5, np.inf, -np.inf, np.nan, 3e38],
    ),
    "I64": (np.dtype(np.int64), torch.int64, [0, 1, -1, 7, -(2**63), 2**63 - 1, 2**40, -(2**33)]),
    "I32": (np.dtype(np.int32), torch.int32, [0, 1, -1, 7, -(2**31), 2**31 - 1, 123456, -654321]),
    "I16": (np.dtype(np.int16), torch.int16, [0, 1, -1, 7, -(2**15), 2**15 - 1, 1234, -4321]),
    "I8": (np.dtype(np.int8), torch.int8, [0, 1, -1, 7, -128, 127, 12, -43]),
    "U8": (np.dtype(np.uint8), torch.uint8, [0, 1, 254, 7, 128, 255, 12, 43]),
    "BOOL": (np.dtype(np.bool_), torch.bool, [True, False, False, True, True, True, False, False]),
}


def sample(tag: str) -> np.ndarray:
    """The edge values of one dtype as a (2, 4) array."""
    npd, _, values = DTYPES[tag]
    return np.array(values).astype(npd).reshape(2, 4)


def from_torch(t: torch.Tensor) -> np.ndarray:
    """A torch tensor as numpy, bfloat16 included (numpy has none; ml_dtypes does)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def to_torch(a: np.ndarray) -> torch.Tensor:
    a = np.asarray(a)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes: NaNs and -0.0 included, which a value comparison would blur."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---- every dtype, both ways, against the library ----


@pytest.mark.parametrize("tag", DTYPES)
@pytest.mark.parametrize("given_as", ["tensor", "numpy"])
def test_every_dtype_written_by_limn_is_read_by_the_library(tmp_path, tag, given_as):
    arr = sample(tag)
    value = Tensor(arr) if given_as == "tensor" else arr
    save(tmp_path / "f.safetensors", {"x": value, "scalar": arr[0, :1].reshape(())})
    read = safetensors.torch.load_file(tmp_path / "f.safetensors")
    assert read["x"].dtype == DTYPES[tag][1]
    assert same_bits(from_torch(read["x"]), arr)
    assert read["scalar"].shape == ()
    with safetensors.safe_open(tmp_path / "f.safetensors", "pt") as f:
        assert f.get_slice("x").get_dtype() == tag


@pytest.mark.parametrize("tag", DTYPES)
def test_every_dtype_written_by_the_library_is_read_by_limn(tmp_path, tag):
    arr = sample(tag)
    tensors = {"x": to_torch(arr), "empty": to_torch(arr[:0]), "scalar": to_torch(arr[0, 0])}
    safetensors.torch.save_file(tensors, tmp_path / "f.safetensors")
    loaded = load(tmp_path / "f.safetensors")
    assert loaded["x"].dtype.np == arr.dtype
    assert same_bits(loaded["x"].numpy(), arr)
    assert loaded["empty"].shape == (0, 4)
    assert loaded["scalar"].shape == ()
    assert same_bits(load_numpy(tmp_path / "f.safetensors")["x"], arr)


def test_a_file_is_byte_identical_to_the_librarys(tmp_path):
    # same header JSON, same tensor order (widest dtype first, then by name), same space padding
    arrays = {f"t_{tag}": sample(tag) for tag in DTYPES} | {"z": np.zeros((0, 3), np.float32)}
    metadata = {"note": "ünïcode ✓"}  # one key: the library orders metadata by a randomly seeded HashMap
    expected = safetensors.torch.save({k: to_torch(v) for k, v in arrays.items()}, metadata=metadata)
    save(tmp_path / "f.safetensors", arrays, metadata)
    assert (tmp_path / "f.safetensors").read_bytes() == expected


def test_metadata_round_trips_both_ways(tmp_path):
    metadata = {"step": "1000", "config": json.dumps({"lr": 3e-4}), "ключ": "значение 😀"}
    save(tmp_path / "limn.safetensors", {"w": np.ones(2, np.float32)}, metadata)
    with safetensors.safe_open(tmp_path / "limn.safetensors", "np") as f:
        assert f.metadata() == metadata
    assert read_metadata(tmp_path / "limn.safetensors") == metadata
    safetensors.numpy.save_file({"w": np.ones(2, np.float32)}, tmp_path / "lib.safetensors", metadata)
    assert read_metadata(tmp_path / "lib.safetensors") == metadata
    save(tmp_path / "none.safetensors", {"w": np.ones(2, np.float32)})
    assert read_metadata(tmp_path / "none.safetensors") == {}


def test_a_file_written_here_loads_into_torch_untransposed(tmp_path):
    # a Linear's weight is (out, in) in both frameworks: (3, 5) stays (3, 5), and torch's Linear computes
    # with it what limn's x @ W.T + b does
    limn.manual_seed(0)
    weight, bias, x = Tensor.randn((3, 5)), Tensor.randn((3,)), Tensor.randn((4, 5))
    save(tmp_path / "f.safetensors", {"weight": weight, "bias": bias})
    state = safetensors.torch.load_file(tmp_path / "f.safetensors")
    assert state["weight"].shape == (3, 5)
    np.testing.assert_array_equal(state["weight"].numpy(), weight.numpy())
    linear = torch.nn.Linear(5, 3)
    linear.load_state_dict(state)
    expected = linear(torch.from_numpy(x.numpy())).detach().numpy()
    np.testing.assert_allclose((x @ weight.T + bias).numpy(), expected, rtol=1e-5, atol=1e-6)


# ---- what save takes ----


def test_save_writes_the_values_of_non_contiguous_broadcast_and_big_endian_arrays(tmp_path):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    arrays = {
        "transposed": base.T,
        "strided": base[:, ::2],
        "broadcast": np.broadcast_to(np.arange(4, dtype=np.int16), (3, 4)),
        "big_endian": base.astype(">f8"),
        "scalar": np.float16(2.5),
    }
    save(tmp_path / "f.safetensors", arrays)
    read = safetensors.numpy.load_file(tmp_path / "f.safetensors")
    for name, arr in arrays.items():
        np.testing.assert_array_equal(read[name], arr, err_msg=name)
        assert read[name].dtype == np.asarray(arr).dtype.newbyteorder("="), name


def test_save_realizes_every_tensor_in_one_batch(tmp_path, monkeypatch):
    runs = count_device_runs(monkeypatch)
    a = Tensor(np.ones((2, 2), np.float32))
    save(tmp_path / "f.safetensors", {"a": a + 1, "b": a * 3, "c": (a @ a).sum()})
    assert runs() == 1
    assert load_numpy(tmp_path / "f.safetensors")["c"] == 8.0


@pytest.mark.parametrize(
    "tensors, metadata, error, match",
    [
        ({"x": [1.0, 2.0]}, None, TypeError, r"save: 'x' is a list; pass a limn Tensor or a numpy array"),
        (
            {"x": np.arange(3, dtype=np.uint16)},
            None,
            TypeError,
            r"'x': numpy dtype uint16 .*astype\(np.int64\)",
        ),
        ({"__metadata__": np.ones(1)}, None, ValueError, r"'__metadata__' is reserved"),
        ({1: np.ones(1)}, None, TypeError, r"tensor names must be str"),
        ({"x": np.ones(1)}, {"step": 3}, TypeError, r"metadata must map str -> str, got 'step': 3"),
    ],
)
def test_save_refuses_what_the_format_cannot_hold(tmp_path, tensors, metadata, error, match):
    with pytest.raises(error, match=match):
        save(tmp_path / "f.safetensors", tensors, metadata)
    assert list(tmp_path.iterdir()) == []


# ---- atomic saves ----


class DyingFile:
    """A file that writes `budget` bytes and then raises, as a full disk or a kill mid-save would."""

    def __init__(self, f, budget: int, error: BaseException) -> None:
        self.f, self.budget, self.error = f, budget, error

    def write(self, data) -> int:
        data = memoryview(data).cast("B")
        if len(data) > self.budget:
            self.f.write(data[: self.budget])
            raise self.error
        self.budget -= len(data)
        return self.f.write(data)

    def __getattr__(self, name: str):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.f.close()


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_save_that_dies_halfway_leaves_the_previous_file_intact(tmp_path, monkeypatch, error):
    path = tmp_path / "ckpt.safetensors"
    save(path, {"w": np.zeros((64, 64), np.float32)})
    before = path.read_bytes()
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: DyingFile(real_fdopen(fd, mode), 5000, error))
    with pytest.raises(type(error)):
        save(path, {"w": np.ones((64, 64), np.float32)})
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind


def test_a_save_whose_rename_fails_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    save(path, {"w": np.zeros(3, np.float32)})
    before = path.read_bytes()

    def rename_fails(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(os, "replace", rename_fails)
    with pytest.raises(OSError, match="rename failed"):
        save(path, {"w": np.ones(3, np.float32)})
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]


def test_a_saved_file_gets_ordinary_permissions_not_the_temp_files(tmp_path):
    umask = os.umask(0o022)
    try:
        save(tmp_path / "new.safetensors", {"w": np.ones(1, np.float32)})
        assert (tmp_path / "new.safetensors").stat().st_mode & 0o777 == 0o644
        (tmp_path / "new.safetensors").chmod(0o640)
        save(tmp_path / "new.safetensors", {"w": np.ones(1, np.float32)})  # an overwrite keeps the old mode
        assert (tmp_path / "new.safetensors").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(umask)


# ---- temps that killed saves left behind ----


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped: no process has it now."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def temp_name(base: str, pid: int, host: str | None = None, random_part: str = "k3x9a_7q") -> str:
    """A temp name as save() makes one: .{basename}.{pid}-{host}-{random}.tmp."""
    return f".{base}.{pid}-{host or serialize._host_tag()}-{random_part}.tmp"


def leftover(folder: Path, name: str, age_s: float = 0.0) -> Path:
    path = folder / name
    path.write_bytes(b"half a checkpoint")
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def test_a_save_removes_the_temp_of_a_saver_that_no_longer_runs(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    stale = leftover(tmp_path, temp_name(path.name, dead_pid()))
    save(path, {"w": np.arange(3, dtype=np.float32)})
    assert not stale.exists()
    assert sorted(os.listdir(tmp_path)) == [path.name]
    np.testing.assert_array_equal(safetensors.numpy.load_file(path)["w"], np.arange(3, dtype=np.float32))


def test_a_save_keeps_the_temp_of_a_saver_that_may_still_run(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    kept = [
        leftover(tmp_path, temp_name(path.name, os.getpid())),  # this process: another thread saving
        leftover(tmp_path, temp_name(path.name, dead_pid(), host="0badc0de")),  # another host: its pid says nothing
    ]
    save(path, {"w": np.ones(2, np.float32)})
    assert all(p.exists() for p in kept)
    np.testing.assert_array_equal(safetensors.numpy.load_file(path)["w"], np.ones(2, np.float32))


def test_a_save_removes_temps_it_cannot_ask_about_only_after_an_hour_untouched(tmp_path):
    # limn 0.1.0 named temps .{basename}.{random8}.tmp, with no pid; another host's pid cannot be asked
    path = tmp_path / "ckpt.safetensors"
    old_unnamed = leftover(tmp_path, f".{path.name}.abcd1234.tmp", age_s=2 * 3600)
    new_unnamed = leftover(tmp_path, f".{path.name}.efgh5678.tmp", age_s=60)
    old_foreign = leftover(tmp_path, temp_name(path.name, 12345, host="0badc0de"), age_s=2 * 3600)
    save(path, {"w": np.ones(2, np.float32)})
    assert not old_unnamed.exists() and not old_foreign.exists()
    assert new_unnamed.exists()


def test_a_save_never_removes_what_is_not_its_own_targets_temp(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    gone = dead_pid()
    others = [
        temp_name("ckpt.safetensors.1", gone),  # another target's temp, whose name starts like this one's
        f".ckpt.safetensors.{gone}.abcd1234.tmp",  # 0.1.0's temp of a target named "ckpt.safetensors.<pid>"
        temp_name("other.safetensors", gone),
        temp_name(path.name, gone)[1:],  # no leading dot
        temp_name(path.name, gone) + ".bak",
        f".{path.name}.abcd1234.tmp.old",
    ]
    for name in others:
        leftover(tmp_path, name, age_s=2 * 3600)
    (tmp_path / temp_name(path.name, gone, random_part="dir12345")).mkdir()  # the pattern, but a folder
    save(path, {"w": np.ones(2, np.float32)})
    assert sorted(os.listdir(tmp_path)) == sorted(
        [*others, temp_name(path.name, gone, random_part="dir12345"), path.name]
    )


# writes a two-tensor checkpoint whose first tensor's bytes are flushed, then says so and stalls mid-write
STALLING_SAVE = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    from limn.serialize import save

    class Stalling:
        def __init__(self, f):
            self.f, self.written = f, 0

        def write(self, data):
            n = self.f.write(data)
            self.written += n
            if self.written > 1 << 20:
                self.f.flush()
                print("writing", flush=True)
                time.sleep(600)
            return n

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    real_fdopen = os.fdopen
    os.fdopen = lambda fd, mode: Stalling(real_fdopen(fd, mode))
    save(sys.argv[1], {"a": np.full((512, 1024), 2.0, np.float32), "b": np.full((512, 1024), 3.0, np.float32)})
    """
)


def test_a_save_killed_mid_write_leaves_the_old_file_and_the_next_save_removes_its_temp(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    old = {"a": np.zeros((4, 4), np.float32)}
    save(path, old)
    before = path.read_bytes()
    child = subprocess.Popen([sys.executable, "-c", STALLING_SAVE, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 120)
        assert ready and child.stdout.readline() == "writing\n", "the child did not start writing"
    finally:
        child.kill()  # SIGKILL: no handler, no finally, no cleanup runs in the child
        child.wait()
    assert child.returncode == -signal.SIGKILL
    temps = [p for p in tmp_path.iterdir() if p != path]
    assert [p.name for p in temps] == [temp_name(path.name, child.pid, random_part=temps[0].name[-12:-4])]
    assert temps[0].stat().st_size > 1 << 20, "the temp does not hold the bytes written before the kill"
    assert path.read_bytes() == before
    np.testing.assert_array_equal(safetensors.numpy.load_file(path)["a"], old["a"])
    save(path, {"a": np.ones((4, 4), np.float32)})
    assert list(tmp_path.iterdir()) == [path], "the killed save's temp was not removed"
    np.testing.assert_array_equal(safetensors.numpy.load_file(path)["a"], np.ones((4, 4), np.float32))


# ---- what a checkpoint path may be ----


def not_a_file(kind: str, tmp_path: Path) -> tuple[Path, type[Exception], str]:
    """A path of `kind`, the error reading it must raise, and what the message calls it."""
    if kind == "fifo":
        os.mkfifo(tmp_path / "ckpt.fifo")  # no writer: open() for reading would wait for one forever
        return tmp_path / "ckpt.fifo", ValueError, "a FIFO"
    if kind == "directory":
        (tmp_path / "ckpt.dir").mkdir()
        return tmp_path / "ckpt.dir", IsADirectoryError, "a directory"
    if kind == "device":
        return Path(os.devnull), ValueError, "a character device"  # reads as an empty file forever
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "ckpt.sock"))
    sock.close()
    return tmp_path / "ckpt.sock", ValueError, "a socket"


READERS: dict[str, Callable[[Path], Any]] = {
    "load": load,
    "load_numpy": load_numpy,
    "read_metadata": read_metadata,
    "load_into": lambda path: load_into(path, {}),
}


def raised_within(call: Callable[[], Any], seconds: float, unblock: Callable[[], None]) -> BaseException | None:
    """What `call()` raised, run in a thread so that a call that blocks fails the test instead of hanging
    the suite (`unblock` then releases it)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        unblock()
        pytest.fail(f"the call was still blocked after {seconds} s")
    return outcome[0]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "socket"])
def test_a_path_that_is_not_a_regular_file_is_refused_before_it_is_opened(tmp_path, kind, reader):
    path, error, what = not_a_file(kind, tmp_path)

    def unblock() -> None:  # a writer that opens and closes the FIFO ends a blocked open and its read
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    raised = raised_within(lambda: READERS[reader](path), 10, unblock)
    assert isinstance(raised, error), f"expected {error.__name__}, got {raised!r}"
    assert f"{path}: is {what}, not a regular file; a checkpoint must be a file" in str(raised)


def test_a_symlink_to_a_checkpoint_reads_as_the_checkpoint(tmp_path):
    values = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    save(tmp_path / "real.safetensors", values, {"step": "3"})
    (tmp_path / "link.safetensors").symlink_to(tmp_path / "real.safetensors")
    expected = safetensors.numpy.load_file(tmp_path / "real.safetensors")["w"]
    np.testing.assert_array_equal(load_numpy(tmp_path / "link.safetensors")["w"], expected)
    np.testing.assert_array_equal(load(tmp_path / "link.safetensors")["w"].numpy(), expected)
    assert read_metadata(tmp_path / "link.safetensors") == {"step": "3"}


# ---- load_into ----


def count_device_runs(monkeypatch) -> Callable[[], int]:
    """Counts the numpy device's graph runs: one per realize() batch."""
    device = limn.get_device("numpy")
    real_run = device.run
    calls = []

    def counting_run(sinks):
        calls.append(len(sinks))
        return real_run(sinks)

    monkeypatch.setattr(device, "run", counting_run)
    return lambda: len(calls)


def model() -> dict[str, Tensor]:
    """A small parameter set, one tensor per dtype plus a realistic weight, all realized."""
    params = {"layers.0.weight": Tensor(np.zeros((3, 5), np.float32))}
    params |= {f"state.{tag}": Tensor(np.zeros((2, 4), DTYPES[tag][0])) for tag in DTYPES}
    return params


def checkpoint(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    values = {"layers.0.weight": np.arange(15, dtype=np.float32).reshape(3, 5)}
    values |= {f"state.{tag}": sample(tag) for tag in DTYPES}
    save(tmp_path / "ckpt.safetensors", values)
    return tmp_path / "ckpt.safetensors", values


def test_load_into_writes_into_the_tensors_own_buffers(tmp_path):
    path, values = checkpoint(tmp_path)
    params = model()
    ids = {name: id(t) for name, t in params.items()}
    buffers = {name: t.node.arg for name, t in params.items()}  # what a capture recording holds
    load_into(path, params)
    for name, t in params.items():
        assert id(t) == ids[name]
        assert t.node.arg is buffers[name], f"{name} was rebound to a new buffer"
        assert same_bits(t.numpy(), values[name]), name


def test_load_into_realizes_the_whole_checkpoint_at_once(tmp_path, monkeypatch):
    path, _ = checkpoint(tmp_path)
    params = model()
    runs = count_device_runs(monkeypatch)
    load_into(path, params)
    assert runs() == 1


def test_load_into_writes_a_tensor_bound_to_two_names_once(tmp_path, monkeypatch):
    # tied weights: an embedding and an output head sharing one tensor appear twice in a checkpoint
    shared = Tensor(np.zeros((2, 3), np.float32))
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    save(tmp_path / "f.safetensors", {"embed.weight": value, "head.weight": value})
    runs = count_device_runs(monkeypatch)
    load_into(tmp_path / "f.safetensors", {"embed.weight": shared, "head.weight": shared})
    assert runs() == 1
    np.testing.assert_array_equal(shared.numpy(), value)


def test_load_into_refuses_tied_names_with_different_values(tmp_path):
    shared = Tensor(np.zeros((2,), np.float32))
    save(tmp_path / "f.safetensors", {"a": np.ones(2, np.float32), "b": np.full(2, 2.0, np.float32)})
    with pytest.raises(ValueError, match=r"tied: 'a' and 'b' are one tensor here but hold different values"):
        load_into(tmp_path / "f.safetensors", {"a": shared, "b": shared})
    np.testing.assert_array_equal(shared.numpy(), np.zeros(2, np.float32))


def test_load_into_with_strict_false_skips_names_the_tensors_lack(tmp_path):
    # e.g. only the weights out of a checkpoint that also holds optimizer state
    path, values = checkpoint(tmp_path)
    weight = Tensor(np.zeros((3, 5), np.float32))
    load_into(path, {"layers.0.weight": weight}, strict=False)
    np.testing.assert_array_equal(weight.numpy(), values["layers.0.weight"])


def test_load_into_gives_a_lazy_tensor_a_buffer_first(tmp_path):
    path, values = checkpoint(tmp_path)
    params = model()
    params["layers.0.weight"] = params["layers.0.weight"] + 1  # not realized yet
    load_into(path, params)
    np.testing.assert_array_equal(params["layers.0.weight"].numpy(), values["layers.0.weight"])


# (what goes wrong, a change to the tensors, a regex naming the key, expected and found)
MISMATCHES: dict[str, tuple[Callable[[dict[str, Tensor]], None], str]] = {
    "missing_key": (
        lambda p: p.update({"layers.1.bias": Tensor(np.zeros(4, np.float32))}),
        r"missing: 'layers.1.bias' \(float32 \(4,\)\) is not in the file",
    ),
    "extra_key": (
        lambda p: p.pop("state.I8"),
        r"extra: 'state.I8' is in the file but not in tensors \(pass strict=False to skip it\)",
    ),
    "wrong_shape": (
        lambda p: p.update({"layers.0.weight": Tensor(np.zeros((5, 3), np.float32))}),
        r"shape: 'layers.0.weight' is \(5, 3\) here but \(3, 5\) in the file",
    ),
    "wrong_dtype": (
        lambda p: p.update({"state.F32": Tensor(np.zeros((2, 4), np.float16))}),
        r"dtype: 'state.F32' is float16 here but float32 in the file",
    ),
}


@pytest.mark.parametrize("mismatch", MISMATCHES)
def test_load_into_refuses_a_mismatch_before_writing_anything(tmp_path, mismatch):
    path, _ = checkpoint(tmp_path)
    params = model()
    change, match = MISMATCHES[mismatch]
    change(params)
    before = {name: t.numpy() for name, t in params.items()}
    with pytest.raises(ValueError, match=match):
        load_into(path, params)
    for name, t in params.items():
        assert t.node.op is Op.BUFFER, f"{name} holds a pending write after the error"
        assert same_bits(t.numpy(), before[name]), f"{name} changed although the load failed"


def test_load_into_lists_every_mismatch_at_once(tmp_path):
    path, _ = checkpoint(tmp_path)
    params = model()
    for change, _ in MISMATCHES.values():
        change(params)
    with pytest.raises(ValueError) as info:
        load_into(path, params)
    for _, match in MISMATCHES.values():
        assert any(re.search(match, line) for line in str(info.value).splitlines()), match


def test_load_into_refuses_a_malformed_file_before_writing_anything(tmp_path):
    path, _ = checkpoint(tmp_path)
    path.write_bytes(path.read_bytes()[:-1])
    params = model()
    with pytest.raises(SafetensorsError, match="runs past the end of the file"):
        load_into(path, params)
    assert all(t.node.op is Op.BUFFER and not t.numpy().any() for t in params.values())


# ---- malformed files ----


def file_bytes(header: dict | str | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    """A file from a header (a dict, JSON text or raw bytes), a data section and an optional forged length."""
    if isinstance(header, dict):
        header = json.dumps(header)
    if isinstance(header, str):
        header = header.encode()
    header += b" " * (-len(header) % 8)
    return (len(header) if length is None else length).to_bytes(8, "little") + header + data


def f32(shape: list, offsets: list) -> dict:
    return {"dtype": "F32", "shape": shape, "data_offsets": offsets}


# each row: the file, a regex the SafetensorsError must match, and whether the library also refuses it
# (where it does not, limn is stricter on purpose: duplicate names, dtypes it lacks, non-0/1 bools)
MALFORMED: dict[str, tuple[bytes, str, bool]] = {
    "shorter_than_8_bytes": (
        b"\x10\x00\x00",
        r"the file is 3 bytes, too short to hold the 8-byte header length",
        True,
    ),
    "header_length_past_the_end": (
        file_bytes({}, length=64),
        r"header length field says 64 bytes, past the end of the file \(8 bytes follow it",
        True,
    ),
    "header_length_absurd": (
        file_bytes({}, length=2**40),
        r"header length field says 1099511627776 bytes, over the 100000000-byte limit",
        True,
    ),
    "header_not_utf8": (
        file_bytes(b'{"\xff\xfe": 1}'),
        r"the header is not valid UTF-8 \(byte 2 of the header\)",
        True,
    ),
    "header_not_json": (file_bytes("{not json"), r"the header is not valid JSON", True),
    "header_empty": (file_bytes(b""), r"the header is not valid JSON", True),
    "header_not_an_object": (file_bytes("[1, 2]"), r"the header must be a JSON object, got a list", True),
    "header_nested_too_deep": (file_bytes("[" * 100_000), r"nested too deeply", True),
    "header_int_too_long": (
        file_bytes('{"a": ' + "1" * 5000 + "}"),
        r"not valid JSON: Exceeds the limit",
        True,
    ),
    "duplicate_names": (
        file_bytes(
            '{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
            '"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}',
            bytes(8),
        ),
        r"duplicate key 'a'",
        False,
    ),
    "duplicate_field_in_an_entry": (
        file_bytes('{"a": {"dtype": "F32", "dtype": "I32", "shape": [1], "data_offsets": [0, 4]}}', bytes(4)),
        r"duplicate key 'dtype'",
        False,
    ),
    "entry_not_an_object": (
        file_bytes({"a": [1, 2]}),
        r"tensor 'a': its entry must be a JSON object, got list",
        True,
    ),
    "entry_without_dtype": (
        file_bytes({"a": {"shape": [1], "data_offsets": [0, 4]}}, bytes(4)),
        r"tensor 'a': its entry has no 'dtype'",
        True,
    ),
    "entry_without_shape": (
        file_bytes({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, bytes(4)),
        r"tensor 'a': its entry has no 'shape'",
        True,
    ),
    "entry_without_data_offsets": (
        file_bytes({"a": {"dtype": "F32", "shape": [1]}}, bytes(4)),
        r"tensor 'a': its entry has no 'data_offsets'",
        True,
    ),
    "dtype_not_a_string": (
        file_bytes({"a": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}}, bytes(4)),
        r"tensor 'a': dtype must be a string, got 4",
        True,
    ),
    "unknown_dtype": (
        file_bytes({"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}}, bytes(16)),
        r"tensor 'a': unknown dtype 'F128'; limn reads F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL",
        True,
    ),
    "a_safetensors_dtype_limn_lacks": (
        file_bytes({"a": {"dtype": "U16", "shape": [1], "data_offsets": [0, 2]}}, bytes(2)),
        r"tensor 'a': unknown dtype 'U16' \(a safetensors dtype limn has no twin for; convert it first\)",
        False,
    ),
    "shape_not_a_list": (
        file_bytes({"a": f32(3, [0, 12])}, bytes(12)),
        r"tensor 'a': shape must be a list of non-negative ints, got 3",
        True,
    ),
    "negative_dim": (
        file_bytes({"a": f32([-1, 3], [0, 12])}, bytes(12)),
        r"shape must be a list of non-negative ints, got \[-1, 3\]",
        True,
    ),
    "bool_dim": (file_bytes({"a": f32([True], [0, 4])}, bytes(4)), r"non-negative ints, got \[True\]", True),
    "float_dim": (file_bytes({"a": f32([1.0], [0, 4])}, bytes(4)), r"non-negative ints, got \[1.0\]", True),
    "too_many_dims": (file_bytes({"a": f32([1] * 33, [0, 4])}, bytes(4)), r"shape has 33 dims", False),
    "shape_too_large_for_an_array": (
        file_bytes({"a": f32([0, 2**62], [0, 0])}),
        r"shape \[0, 4611686018427387904\] is too large for any array",
        False,
    ),
    "offsets_not_ints": (
        file_bytes({"a": f32([1], [0.0, 4.0])}, bytes(4)),
        r"data_offsets must be \[begin, end\], two non-negative ints, got \[0.0, 4.0\]",
        True,
    ),
    "offsets_bools": (
        file_bytes({"a": f32([0], [False, False])}),
        r"two non-negative ints, got \[False, False\]",
        True,
    ),
    "offsets_not_a_pair": (
        file_bytes({"a": f32([1], [4])}, bytes(4)),
        r"two non-negative ints, got \[4\]",
        True,
    ),
    "offsets_negative": (file_bytes({"a": f32([1], [-4, 0])}, bytes(4)), r"got \[-4, 0\]", True),
    "offsets_reversed": (
        file_bytes({"a": f32([0], [4, 0])}, bytes(4)),
        r"tensor 'a': data_offsets \[4, 0\] end before they begin",
        True,
    ),
    "byte_length_disagrees_with_dtype_and_shape": (
        file_bytes({"a": f32([3], [0, 8])}, bytes(8)),
        r"tensor 'a': data_offsets \[0, 8\] hold 8 bytes, but F32 of shape \[3\] needs 12 bytes",
        True,
    ),
    "gap_between_tensors": (
        file_bytes({"a": f32([1], [0, 4]), "b": f32([1], [8, 12])}, bytes(12)),
        r"a gap of 4 bytes between tensor 'a' \[0, 4\) and tensor 'b' \[8, 12\)",
        True,
    ),
    "overlapping_tensors": (
        file_bytes({"a": f32([2], [0, 8]), "b": f32([2], [4, 12])}, bytes(12)),
        r"tensor 'b' \[4, 12\) overlaps tensor 'a' \[0, 8\)",
        True,
    ),
    "two_names_one_range": (
        file_bytes({"a": f32([1], [0, 4]), "b": f32([1], [0, 4])}, bytes(4)),
        r"overlaps",
        True,
    ),
    "range_past_the_end": (
        file_bytes({"a": f32([2], [0, 8])}, bytes(4)),
        r"tensor 'a' \[0, 8\) runs past the end of the file: the data section holds 4 bytes",
        True,
    ),
    "trailing_bytes": (
        file_bytes({"a": f32([1], [0, 4])}, bytes(8)),
        r"4 trailing bytes after the last tensor",
        True,
    ),
    "data_not_right_after_the_header": (
        file_bytes({"a": f32([1], [4, 8])}, bytes(8)),
        r"the data section does not start right after the header: the first tensor 'a' \[4, 8\) leaves 4",
        True,
    ),
    "metadata_not_an_object": (
        file_bytes({"__metadata__": ["a"]}),
        r"__metadata__ must be a JSON object, got list",
        True,
    ),
    "metadata_value_not_a_string": (
        file_bytes({"__metadata__": {"step": 3}}),
        r"__metadata__\['step'\] must be a string, got int 3",
        True,
    ),
    "bool_byte_not_0_or_1": (
        file_bytes({"a": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x02"),
        r"tensor 'a': BOOL bytes must be 0 or 1",
        False,
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_file_raises_safetensors_error_saying_what_is_wrong(tmp_path, case):
    raw, match, _ = MALFORMED[case]
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)
    with pytest.raises(SafetensorsError, match=match) as info:
        load(path)
    assert str(path) in str(info.value)  # and where
    with pytest.raises(SafetensorsError, match=match):
        load_numpy(path)


@pytest.mark.parametrize("case", [c for c, (_, _, library_refuses) in MALFORMED.items() if library_refuses])
def test_the_library_refuses_the_same_malformed_file(case):
    # a check on the cases themselves: each is malformed by the format's own reader too
    with pytest.raises(Exception):  # noqa: B017 (the library's error type is not exported)
        safetensors.torch.load(MALFORMED[case][0])


def test_a_malformed_header_is_refused_by_read_metadata_too(tmp_path):
    raw, match, _ = MALFORMED["gap_between_tensors"]
    (tmp_path / "bad.safetensors").write_bytes(raw)
    with pytest.raises(SafetensorsError, match=match):
        read_metadata(tmp_path / "bad.safetensors")


def test_safetensors_error_is_a_value_error():
    assert issubclass(SafetensorsError, ValueError)


def test_null_metadata_reads_as_none_as_in_the_library(tmp_path):
    raw = file_bytes({"__metadata__": None, "a": f32([1], [0, 4])}, bytes(4))
    (tmp_path / "f.safetensors").write_bytes(raw)
    assert read_metadata(tmp_path / "f.safetensors") == {}
    assert load_numpy(tmp_path / "f.safetensors")["a"].tolist() == [0.0]


def test_an_empty_checkpoint_round_trips(tmp_path):
    save(tmp_path / "f.safetensors", {})
    assert load(tmp_path / "f.safetensors") == {}
    assert safetensors.numpy.load_file(tmp_path / "f.safetensors") == {}


# ---- the reader fuzz ----


def fuzz_seeds(tmp_path: Path) -> list[bytes]:
    """Valid files to mutate: limn's with every dtype and metadata, the library's, an empty one, and one
    of zero-size and scalar tensors."""
    save(tmp_path / "a", {f"t.{tag}": sample(tag)[:, :2] for tag in DTYPES}, {"step": "7", "lr": "3e-4"})
    library = safetensors.torch.save({"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(3, dtype=torch.bfloat16)})
    save(tmp_path / "c", {})
    save(tmp_path / "d", {"empty": np.zeros((0, 5), np.float32), "s": np.int8(3), "e": np.zeros(0, np.bool_)})
    return [
        (tmp_path / "a").read_bytes(),
        library,
        (tmp_path / "c").read_bytes(),
        (tmp_path / "d").read_bytes(),
    ]


def edit_header(raw: bytes, rng: random.Random) -> bytes:
    """A structural edit: one field of one entry (or the metadata) changed, then a consistent length."""
    length = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8 : 8 + length]), raw[8 + length :]
    short_list = [rng.choice([-1, 0, 1, 2, 4, True, 2**63]) for _ in range(rng.randrange(4))]
    junk = [rng.randrange(-2, 80), 2**64, 1.5, True, None, "F32", "I64", {}, [0, 4], short_list]
    name = rng.choice(list(header) + ["__metadata__", "new"])
    entry = header.setdefault(name, {})
    if not isinstance(entry, dict) or name == "__metadata__":
        header[name] = rng.choice([{"k": "v"}, {"k": 1}, None, [], "x"])
    elif rng.random() < 0.1:
        header[name] = rng.choice(junk)
    elif rng.random() < 0.2 and entry:
        del entry[rng.choice(list(entry))]
    else:
        entry[rng.choice(["dtype", "shape", "data_offsets"])] = rng.choice(junk)
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


def mutate(raw: bytes, rng: random.Random) -> bytes:
    b = bytearray(raw)
    kind = rng.randrange(6)
    if kind == 0:  # bit flips
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        del b[rng.randrange(len(b)) :]
    elif kind == 2:  # byte insertions
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes([rng.randrange(256)])
    elif kind == 3:  # a deleted run
        i = rng.randrange(len(b))
        del b[i : i + rng.randint(1, 8)]
    elif kind == 4:  # a random length field: tiny, near the true one, or huge
        length = rng.choice([rng.randrange(16), len(b) - 8 + rng.randint(-9, 9), rng.randrange(2**64)])
        b[:8] = max(length, 0).to_bytes(8, "little")
    else:
        return edit_header(raw, rng)
    return bytes(b)


def test_fuzzed_files_raise_only_safetensors_error(tmp_path):
    # and whatever limn accepts, the library accepts too and reads the same bits
    rng = random.Random(1234)
    seeds = fuzz_seeds(tmp_path)
    path = tmp_path / "fuzzed.safetensors"
    outcomes = {"loaded": 0, "refused": 0}
    start = time.perf_counter()
    path.write_bytes(b"")
    for i in range(12_000):
        raw = mutate(seeds[i % len(seeds)], rng)
        with open(path, "r+b") as f:  # rewritten in place: truncating on open costs ms a file on some disks
            f.write(raw)
            f.truncate()
        try:
            arrays = load_numpy(path)
            read_metadata(path)
        except SafetensorsError:
            outcomes["refused"] += 1
            continue
        except Exception as e:  # anything else is a reader bug: show the file that did it
            raise AssertionError(f"mutation {i} raised {type(e).__name__}: {e}\nfile: {raw[:300]!r}") from e
        outcomes["loaded"] += 1
        try:
            library = safetensors.torch.load(raw)
        except Exception as e:
            raise AssertionError(f"mutation {i}: limn loaded a file the library refuses ({e})\n{raw[:300]!r}") from e
        assert library.keys() == arrays.keys(), f"mutation {i}: {raw[:300]!r}"
        for name, t in library.items():
            assert same_bits(from_torch(t), arrays[name]), f"mutation {i}, tensor {name!r}: {raw[:300]!r}"
    assert outcomes["refused"] > 6_000 and outcomes["loaded"] > 200, outcomes  # the mutations reach both ends
    assert time.perf_counter() - start < 30  # about 1 s here; the bound only catches a reader gone slow
