"""Rules for the c device's kernel disk cache when the disk misbehaves:
- a cache slot held by a directory (where a .so or a .sha256 would go) is a poisoned entry: the kernel is
  built, the directory removed and the entry written in its place, and one warning names it;
- another kernel's library and checksum copied into a slot do not verify there: rebuilt, with a warning;
- a FIFO in a cache slot is a miss, not a hang;
- a cache folder that cannot be written (read-only, permission denied, full, a file in its place) or
  run from (noexec) is replaced by a private temp folder for the rest of the process, with one warning
  naming the folder, the cause and the folder used instead; when that fails too, DeviceError names both.
The oracle is the numpy device. The tests run as root, whom chmod does not stop, so most failures are
simulated by making the OS call that would fail raise the errno it would raise; each test says which.
"""

import ctypes
import errno
import os
import signal
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c import library_cache
from limn.c.device import CDevice
from limn.c.library_cache import KernelCacheWarning


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh cache folder, a fresh fallback state, and the fallback's temp folder inside tmp_path."""
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(library_cache, "_fallback", library_cache.CacheFallback())
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path / "cache" / "c"


# integer-valued float32 sums and maxima: exact on every device, so the comparison can be exact too
def first_kernel() -> Tensor:
    return (Tensor(np.arange(16, dtype=np.float32)) * 2 + 1).sum()


def next_kernel() -> Tensor:
    return (Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)) * 3 - 1).max(axis=1)


def on(device: CDevice, make: Callable[[], Tensor]) -> np.ndarray:
    """`make()` computed on `device`, checked against the numpy device."""
    limn.register_device("c_cache", lambda: device)
    limn.set_device("c_cache")
    got = make().numpy()
    limn.set_device("numpy")
    np.testing.assert_array_equal(got, make().numpy())
    return got


def cache_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, KernelCacheWarning)]


def kernel_libraries(folder: Path) -> list[Path]:
    """The kernels' libraries in the folder: the device's team library (c/team.py) is not a kernel's."""
    return [lib for lib in folder.glob("*.so") if b"limn_team_set" not in lib.read_bytes()]


def only_library(folder: Path) -> Path:
    libs = kernel_libraries(folder)
    assert len(libs) == 1, f"expected one library in {folder}, found {libs}"
    return libs[0]


# ---- a slot held by something that is not a file ----


@pytest.mark.parametrize("slot", [".so", ".sha256"])
def test_a_directory_in_a_cache_slot_is_removed_and_the_entry_written_reported_once(cache, slot):
    on(CDevice(), first_kernel)
    path = only_library(cache).with_suffix(slot)
    path.unlink()
    path.mkdir()
    (path / "stray.txt").write_text("a poisoned slot")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on(CDevice(), first_kernel)  # a miss: built, and the directory gives way to the entry
        on(CDevice(), next_kernel)  # other kernels are cached as usual
    reported = cache_warnings(caught)
    assert len(reported) == 1 and str(path) in reported[0] and "was a directory" in reported[0], reported
    assert path.is_file(), "the slot healed: the entry is a file again"
    assert not list(cache.glob("*.tmp")) and not list(cache.glob("*.c")), "temp files left behind"
    libs = {p: p.stat().st_mtime_ns for p in cache.glob("*.so")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on(CDevice(), first_kernel)  # a later device: a cache hit, nothing rebuilt, nothing reported
    assert not cache_warnings(caught) and {p: p.stat().st_mtime_ns for p in cache.glob("*.so")} == libs


def test_another_kernels_library_in_a_slot_is_rebuilt_with_a_warning(cache):
    """A library verifies against the slot it is loaded for: another kernel's library and checksum, whole
    and valid, copied into this kernel's slot are not run (they would compute the other kernel, or fail on a
    missing symbol); the kernel is built again, with a warning, and the slot holds its own entry again."""
    on(CDevice(), first_kernel)
    mine = only_library(cache)
    on(CDevice(), next_kernel)
    theirs = [p for p in cache.glob("*.so") if p != mine]
    for suffix in (".sha256", ".so"):  # each lands as a new file: this process keeps the old ones mapped
        for lib in theirs:
            copy = cache / f"copy{suffix}.tmp"
            copy.write_bytes(lib.with_suffix(suffix).read_bytes())
            os.replace(copy, mine.with_suffix(suffix))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on(CDevice(), first_kernel)  # compared with the numpy device: the other kernel's numbers would fail
    reported = cache_warnings(caught)
    assert any(str(mine) in r and "does not verify" in r for r in reported), reported
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on(CDevice(), first_kernel)
    assert not cache_warnings(caught), "the rebuilt entry verifies"


def test_a_fifo_in_a_cache_slot_is_a_miss_not_a_hang(cache):
    on(CDevice(), first_kernel)
    lib = only_library(cache)
    lib.unlink()
    os.mkfifo(lib)  # no writer: a blocking open would wait forever

    def hung(signum, frame):
        raise TimeoutError("reading a FIFO in the cache blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        on(CDevice(), first_kernel)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert lib.is_file(), "the rebuilt library did not replace the FIFO"


# ---- a folder that cannot be written or run from ----


def fail_in(folder: Path, code: int, monkeypatch) -> None:
    """Makes creating a file inside `folder` raise OSError(code): what a read-only mount (EROFS), a
    folder without write permission (EACCES) or an exhausted quota (EDQUOT) does to mkstemp."""
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).is_relative_to(folder):
            raise OSError(code, os.strerror(code), os.path.join(dir, "tmpXXXXXXXX"))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


def disk_full_cc(tmp_path: Path, folder: Path) -> str:
    """A cc that fails as ld does on a full disk when its output goes into `folder` (ENOSPC)."""
    real_cc = subprocess.run(["sh", "-c", "command -v cc"], capture_output=True, text=True).stdout.strip()
    wrapper = tmp_path / "cc-disk-full"
    wrapper.write_text(
        '#!/bin/sh\nout=""; prev=""\nfor a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
        f'case "$out" in {folder}/*)\n'
        '  echo "/usr/bin/ld: final link failed: No space left on device" >&2; exit 1;;\n'
        "esac\n"
        f'exec {real_cc} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def noexec(folder: Path, monkeypatch) -> None:
    """Makes loading a library from inside `folder` fail as dlopen does on a noexec mount."""
    real_cdll = ctypes.CDLL

    def cdll(name, *args, **kwargs):
        if Path(name).is_relative_to(folder):
            raise OSError(f"{name}: failed to map segment from shared object")
        return real_cdll(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", cdll)


def a_file_at(folder: Path) -> None:
    """A regular file where the cache folder would be (real, not simulated): mkdir fails with EEXIST."""
    folder.write_text("a file, not a folder")


# each row: how the failure is made (it says what it simulates), and the cause the warning must name
FAILURES: dict[str, tuple[Callable[[Path, Path, pytest.MonkeyPatch], str | None], str]] = {
    "read_only": (lambda tmp, c, mp: fail_in(c, errno.EROFS, mp), os.strerror(errno.EROFS)),
    "permission_denied": (lambda tmp, c, mp: fail_in(c, errno.EACCES, mp), os.strerror(errno.EACCES)),
    "quota_exhausted": (lambda tmp, c, mp: fail_in(c, errno.EDQUOT, mp), os.strerror(errno.EDQUOT)),
    "disk_full": (lambda tmp, c, mp: disk_full_cc(tmp, c), os.strerror(errno.ENOSPC)),
    "a_file_in_its_place": (lambda tmp, c, mp: a_file_at(c), "not a folder"),
    "noexec_mount": (lambda tmp, c, mp: noexec(c, mp), "failed to map segment"),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_an_unusable_cache_folder_falls_back_to_a_private_folder_with_one_warning(
    tmp_path, cache, monkeypatch, failure
):
    make_failure, cause = FAILURES[failure]
    cache.parent.mkdir(parents=True)
    cc = make_failure(tmp_path, cache, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on(CDevice(cc=cc), first_kernel)
        on(CDevice(cc=cc), next_kernel)  # the next kernel, on a later device: straight to the fallback
    private = library_cache._fallback.private
    reported = cache_warnings(caught)
    assert len(reported) == 1, reported
    assert str(cache) in reported[0] and cause in reported[0] and str(private) in reported[0], reported[0]
    assert private.name.startswith("limn-kernels-") and len(kernel_libraries(private)) == 2
    assert "\n" not in reported[0]


def test_when_the_fallback_folder_fails_too_a_device_error_names_both(cache, monkeypatch):
    # simulated: every file creation fails, EROFS in the cache folder and ENOSPC in the temp folder
    cache.mkdir(parents=True)
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is None:
            return real_mkstemp(*args, **kwargs)
        code = errno.EROFS if Path(dir).is_relative_to(cache) else errno.ENOSPC
        raise OSError(code, os.strerror(code), os.path.join(dir, "tmpXXXXXXXX"))

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    limn.register_device("c_cache", CDevice)
    with pytest.raises(limn.DeviceError) as info:  # at set_device when the device builds its team's library
        limn.set_device("c_cache")
        first_kernel().numpy()
    text = str(info.value)
    private = str(library_cache._fallback.private)
    for part in (str(cache), os.strerror(errno.EROFS), private, os.strerror(errno.ENOSPC), "LIMN_CACHE_DIR"):
        assert part in text, f"{part!r} missing from: {text}"
