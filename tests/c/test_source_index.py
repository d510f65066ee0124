"""Rules for the c device's source index (limn.c.source_index):
- a device that meets a nest an earlier device (an earlier process) rendered with the same options takes
  its source from the index and renders nothing, and the source is byte for byte what rendering gives;
- the entry is named by the nest, the renderer's options and the code fingerprint: other options or another
  limn render anew;
- an entry that is not what was written for its slot (a changed byte, a truncated file, another nest's
  entry, a FIFO or a folder in its place) is a miss: the kernel is rendered (and the entry written again
  where it can be), never hung on;
- an index folder that cannot be written is no error: kernels render and run as without it;
- a kernel built by hand (no nest key) is rendered, not indexed.
The oracle for values is the numpy device; for sources, the renderer itself.
"""

import os
from pathlib import Path

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c import source_index as c_source_index
from limn.c.device import CDevice
from limn.compiler import nest_memo
from limn.compiler.codegen import ir


@pytest.fixture
def index(tmp_path, monkeypatch) -> Path:
    """A fresh cache folder, its source index folder, and no nest lowered before in this process."""
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nest_memo, "_lowered_before", {})
    return tmp_path / "cache" / "c" / "sources"


def make() -> Tensor:
    x = Tensor(np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6))
    return ((x * 3).exp() + x).sum(1)


class CountingDevice(CDevice):
    """A c device that counts how often its renderer runs."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rendered = 0
        render = self.renderer.render

        def counted(kernel):
            self.rendered += 1
            return render(kernel)

        self.renderer.render = counted


def run_on(device: CDevice) -> tuple[np.ndarray, list[str]]:
    """make() on `device`, checked against the numpy device, and the sources of its kernels."""
    limn.register_device("c_index", lambda: device)
    limn.set_device("c_index")
    try:
        y = make()
        sources = [device.render(k) for k in ir(y).kernels]
        got = y.numpy()
    finally:
        limn.set_device("numpy")
    np.testing.assert_allclose(got, make().numpy(), rtol=1e-6)
    return got, sources


def entries(index: Path) -> list[Path]:
    return sorted(p for p in index.rglob("*.c"))


def test_a_nest_rendered_before_is_read_back_not_rendered(index, monkeypatch):
    first = CountingDevice()
    _, sources = run_on(first)
    assert first.rendered > 0 and entries(index), "the first device renders and keeps its sources"
    monkeypatch.setattr(nest_memo, "_lowered_before", {})  # as in a new process
    second = CountingDevice()
    _, again = run_on(second)
    assert second.rendered == 0, "every source should come from the index"
    assert again == sources
    oracle = CDevice().renderer  # rendering itself, with no index behind it
    assert again == [oracle.render(k)[1] for k in ir(make()).kernels]


def test_other_options_or_another_limn_render_anew(index, monkeypatch):
    run_on(CDevice())
    kept = len(entries(index))
    serial = CountingDevice(threads=False)
    run_on(serial)
    assert serial.rendered > 0 and len(entries(index)) > kept
    monkeypatch.setattr(c_source_index, "code_fingerprint", lambda: "another limn")
    monkeypatch.setattr(nest_memo, "_lowered_before", {})
    changed = CountingDevice()
    run_on(changed)
    assert changed.rendered > 0


@pytest.mark.parametrize("damage", ["a changed byte", "truncated", "a fifo", "a folder"])
def test_a_damaged_entry_is_a_miss_and_is_written_again(index, monkeypatch, damage):
    _, sources = run_on(CDevice())
    victim = entries(index)[0]
    text = victim.read_text()
    victim.unlink()
    if damage == "a changed byte":
        cut = text.index("{") + 1
        victim.write_text(text[:cut] + " " + text[cut:])
    elif damage == "truncated":
        victim.write_text(text[: len(text) // 2])
    elif damage == "a fifo":
        os.mkfifo(victim)
    else:
        victim.mkdir()
    monkeypatch.setattr(nest_memo, "_lowered_before", {})
    device = CountingDevice()
    if damage in ("a changed byte", "truncated"):  # an entry there that does not verify is reported
        with pytest.warns(RuntimeWarning, match="does not verify"):
            _, again = run_on(device)
    else:
        _, again = run_on(device)
    assert device.rendered >= 1 and again == sources
    if damage in ("a changed byte", "truncated"):
        assert victim.read_text() == text, "the entry should be written again, whole"


def test_another_nests_entry_in_a_slot_is_rendered_anew_with_a_warning(index, monkeypatch):
    """An entry names the slot it was written for: another nest's entry, whole and valid, copied into a slot
    is not compiled in its place (it would run the other kernel); the nest is rendered, with a warning, and
    the slot holds its own source again."""
    _, sources = run_on(CDevice())
    (first,) = entries(index)
    limn.register_device("c_other", CDevice)
    limn.set_device("c_other")
    (Tensor(np.ones((3, 5), np.float32)) * 2).amax(0).numpy()  # another nest, another entry
    limn.set_device("numpy")
    (second,) = [p for p in entries(index) if p != first]
    mine = first.read_bytes()
    first.unlink()
    first.write_bytes(second.read_bytes())
    monkeypatch.setattr(nest_memo, "_lowered_before", {})
    device = CountingDevice()
    with pytest.warns(RuntimeWarning, match="does not verify"):
        _, again = run_on(device)
    assert device.rendered >= 1 and again == sources
    assert first.read_bytes() == mine, "the entry should be written again, whole"


def test_an_unwritable_index_folder_is_no_error(index, monkeypatch):
    index.parent.mkdir(parents=True)
    index.write_text("a file where the index folder would be")
    device = CountingDevice()
    run_on(device)
    assert device.rendered > 0
    assert index.read_text() == "a file where the index folder would be"


def test_a_kernel_built_by_hand_is_rendered_not_indexed(index):
    device = CDevice()
    kernel = ir(make()).kernels[0]
    by_hand = type(kernel)(kernel.name, kernel.op, kernel.loop_shape, kernel.inputs, kernel.outputs, kernel.body)
    assert by_hand.nest == "" and kernel.nest
    assert device.render(by_hand) == device.renderer.render(by_hand)[1]
    assert not entries(index)


def test_the_fingerprint_covers_the_c_texts_kernels_include(tmp_path):
    # a kernel's source carries limn/c/kernels/tile.c, so a changed tile.c must name other entries, as a
    # changed module does
    from limn.compiler import cache_files

    (tmp_path / "kernels").mkdir()
    (tmp_path / "module.py").write_text("x = 1\n")
    (tmp_path / "kernels" / "tile.c").write_text("/* one */\n")
    before = cache_files.code_fingerprint.__wrapped__((tmp_path,))
    (tmp_path / "kernels" / "tile.c").write_text("/* two */\n")
    after = cache_files.code_fingerprint.__wrapped__((tmp_path,))
    (tmp_path / "notes.txt").write_text("not code\n")
    assert before != after, "a changed C text under the folder did not change the fingerprint"
    assert cache_files.code_fingerprint.__wrapped__((tmp_path,)) == after, "a non-code file changed it"
