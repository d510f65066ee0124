"""The random number generator: Widynski's Squares counter-based generator, composed from the primitives.

A draw of n numbers hashes the counters c, c+1, ..., c+n-1 with the seed's key into 32-bit words, as a lazy
graph of exact float64 adds, multiplies and casts, and advances the counter by n with an assign. The key and
the counter are device tensors (four 16-bit limbs each), so a step captured by limn.capture reads and advances
them on each replay (fresh numbers every call), and numpy, c and any device give the same bits for one seed.
Pipeline: **tensor (sources)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

import limn
from limn import dtypes
from limn.errors import ArgumentError
from limn.frontend import custom_call
from limn.graph import custom
from limn.graph.ops import Node, Op
from limn.runtime.device import current_device, get_device

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

# ---- the generator, on the host (the reference the graph below must match bit for bit) ----
#
# Squares (B. Widynski, "Squares: a fast counter-based RNG", 2020), the 4-round 32-bit output:
#
#     x = y = ctr * key;  z = y + key
#     x = rot32(x * x + y);  x = rot32(x * x + z);  x = rot32(x * x + y)
#     out = (x * x + z) >> 32                         (all arithmetic mod 2**64; rot32 swaps the halves)
#
# It needs no xor or shift, only multiply, add and a swap of the 32-bit halves, which is why limn uses it:
# the op set has none of those bit operations. Each key gives 2**64 counters, so the period of one
# seed's stream is 2**64 32-bit words; the paper reports it passing BigCrush and PractRand for keys with
# irregular bit patterns, which _key makes.

MASK64 = (1 << 64) - 1
LIMB = 2**16  # a 64-bit word is four 16-bit limbs, low first, each an exact float64 in [0, 2**16)


def _key(seed: int) -> int:
    """A Squares key from a seed, by the rule of Widynski's key generator: 16 hex digits, none zero, the
    eight of each half distinct, the lowest odd (an irregular pattern of about half ones)."""
    rng = np.random.default_rng(int(seed) & MASK64)
    digits: list[int] = []
    for _ in range(2):
        digits += [int(d) for d in rng.permutation(np.arange(1, 16))[:8]]
    if digits[-1] % 2 == 0:
        odd = next(i for i in range(8, 16) if digits[i] % 2)  # the lower half holds an odd digit: swap it last
        digits[odd], digits[-1] = digits[-1], digits[odd]
    key = 0
    for d in digits:
        key = key * 16 + d
    return key


def squares32_host(counters: np.ndarray, key: int) -> np.ndarray:
    """The 32-bit words for uint64 `counters` under `key`, in numpy's wrapping uint64 arithmetic: the
    reference that the device graph (squares32) is tested against bit for bit."""
    with np.errstate(over="ignore"):
        k = np.uint64(key)
        x = y = counters.astype(np.uint64) * k
        z = y + k
        x = _rot32_host(x * x + y)
        x = _rot32_host(x * x + z)
        x = _rot32_host(x * x + y)
        return ((x * x + z) >> np.uint64(32)).astype(np.uint32)


def _rot32_host(x: np.ndarray) -> np.ndarray:
    return (x >> np.uint64(32)) | (x << np.uint64(32))


def limbs_of(value: int) -> list[float]:
    """A 64-bit integer as its four 16-bit limbs, low first."""
    return [float((value >> (16 * i)) & 0xFFFF) for i in range(4)]


# ---- the generator, as a graph: 64-bit words as four float64 limbs ----

Word = tuple["Tensor", "Tensor", "Tensor", "Tensor"]  # a 64-bit unsigned integer, four 16-bit limbs, low first


def _floor_div(x: Tensor, power: float) -> Tensor:
    """floor(x / power) for 0 <= x / power < 2**31 and power a power of two: the quotient is exact and the
    cast truncates, which is floor for x >= 0."""
    return (x * (1.0 / power)).cast(dtypes.int32).cast(dtypes.float64)


def _carried(columns: list[Tensor]) -> Word:
    """Four limbs from column sums (each < 2**52): every limb into [0, 2**16), its carry into the next, and
    the carry out of the top limb dropped (mod 2**64)."""
    out, carry = [], None
    for column in columns:
        x = column if carry is None else column + carry
        carry = _floor_div(x, LIMB)
        out.append(x - carry * LIMB)  # x mod 2**16
    return out[0], out[1], out[2], out[3]


def _mul_add(a: Word, b: Word, c: Word | None = None) -> Word:
    """a * b (+ c) mod 2**64. Column k sums a_i b_j over i + j = k (at most 4 products < 2**32) and c_k,
    under 2**35 with the carry: exact in float64."""
    columns = []
    for k in range(4):
        total = a[0] * b[k] if c is None else c[k] + a[0] * b[k]
        for i in range(1, k + 1):
            total = total + a[i] * b[k - i]
        columns.append(total)
    return _carried(columns)


def _add(a: Word, b: Word) -> Word:
    return _carried([x + y for x, y in zip(a, b)])


def _rot32(w: Word) -> Word:
    return w[2], w[3], w[0], w[1]  # swap the 32-bit halves


def squares32(counter: Word, key: Word) -> Tensor:
    """The Squares word (as float64 in [0, 2**32)) of each counter under key: the graph twin of
    squares32_host, bit for bit. counter's limbs have the output's shape; key's broadcast."""
    x = y = _mul_add(counter, key)
    z = _add(y, key)
    x = _rot32(_mul_add(x, x, y))
    x = _rot32(_mul_add(x, x, z))
    x = _rot32(_mul_add(x, x, y))
    out = _mul_add(x, x, z)
    return out[3] * LIMB + out[2]  # the top 32 bits


# ---- the generator's state on a device ----


class Generator:
    """One stream of random numbers on one device, as torch.Generator: the key made from the seed and the
    counter, each a realized float64 (4,) device tensor of 16-bit limbs. words(shape) gives the next
    prod(shape) words lazily and advances the counter with an assign, so nothing is drawn on the host.

    >>> g = Generator(seed=7)
    >>> a, b = g.words((3,)), g.words((3,))
    >>> _ = g.manual_seed(7)
    >>> (a.numpy() == g.words((3,)).numpy()).all(), (a.numpy() == b.numpy()).any()
    (np.True_, np.False_)
    """

    def __init__(self, seed: int = 0, device: str | None = None) -> None:
        self.key = limn.Tensor(np.array(limbs_of(_key(seed))), dtype=dtypes.float64, device=device)
        self.counter = limn.Tensor(np.zeros(4), dtype=dtypes.float64, device=device)
        self.device = self.key.device
        self.seed = int(seed)
        self._pending = 0  # words drawn since the counter's bytes were written (see words)
        self._lock = threading.Lock()  # one draw at a time reads and advances the counter
        _live.add(self)

    def manual_seed(self, seed: int) -> Generator:
        """Restarts the stream of `seed` in this generator's own buffers (through the device's copyin, so a
        captured step that reads them keeps reading them, and draws the new stream)."""
        self.counter.realize()  # a pending advance must not land after the reset
        _write(self.key, np.array(limbs_of(_key(seed))))
        _write(self.counter, np.zeros(4))
        self.seed = int(seed)
        return self

    def position(self) -> int:
        """How many words this generator has given since its seed (mod 2**64); reads the device."""
        self.counter.realize()
        return limbs_value(self.counter.numpy())

    def host_words(self, shape: tuple[int, ...]) -> Tensor:
        """words(shape) computed on the host by squares32_host (the same bits) as a numpy-device tensor, the
        counter advanced through copyin: no graph runs, so nothing compiles. Eager draws take this path."""
        n = _count(shape)
        with self._lock:
            start = self.position()
            _write(self.counter, np.array(limbs_of((start + n) & MASK64)))
        counters = (np.arange(n, dtype=np.uint64) + np.uint64(start)) if n else np.zeros(0, np.uint64)
        words = squares32_host(counters, limbs_value(self.key.numpy()))
        return limn.Tensor(words.astype(np.float64).reshape(shape), device="numpy")

    def words(self, shape: tuple[int, ...]) -> Tensor:
        """The next prod(shape) Squares words, float64 in [0, 2**32) in row-major order, lazily; the counter
        is advanced by a pending assign, realized with the step (or before the next eager draw).

        Eager, a pending advance is realized first, so every draw's graph is the same for its shape (a
        compiled device reuses its plan). While limn.capture records (on_device), nothing is realized
        mid-step: each draw reads the counter's bytes plus the words drawn since (`pending`), and one
        assign carries the total, so every run of the recording reads the same counter bytes."""
        counter, first = self._advance(_count(shape))
        return words_at(self.key, counter, shape, first)

    def draw(self, n: int) -> Tensor:
        """The counter of the first of the next n words, a lazy (4,) float64 tensor of limbs, with the counter
        advanced past them as words(n) would: for a kernel that makes its words itself (fused attention's
        dropout), from counters draw(n), draw(n) + 1, ... under self.key, as words_at spells them."""
        counter, first = self._advance(_count((n,)))
        step = limbs_of(first)
        return limn.Tensor.stack(list(_carried([counter[i] + step[i] for i in range(4)])))

    def _advance(self, n: int) -> tuple[Tensor, int]:
        """The counter's bytes (before any pending advance) and how many words past them this draw of n
        starts; the pending assign then carries n more. One thread at a time (the generator's lock)."""
        with self._lock:
            return self._advance_unlocked(n)

    def _advance_unlocked(self, n: int) -> tuple[Tensor, int]:
        if not on_device:
            self.counter.realize()
        if self.counter.node.op is Op.BUFFER:
            self._pending = 0
        target = self.counter.node if self.counter.node.op is Op.BUFFER else self.counter.node.srcs[0]
        counter = limn.Tensor._from_node(target, self.device)  # the counter's bytes, before any pending advance
        if self._pending + n >= 2**32:
            raise ArgumentError("random numbers: a captured step draws 2**32 numbers or more; draw fewer")
        first = self._pending
        self._pending += n
        step = limbs_of(self._pending)
        advanced = limn.Tensor.stack(list(_carried([counter[i] + step[i] for i in range(4)])))  # 4 0-d limbs -> (4,)
        if self.counter.node.op is Op.BUFFER:
            self.counter.assign(advanced)
        else:  # one pending assign, now carrying every draw since the bytes were written
            self.counter.node = Node(Op.ASSIGN, (target, advanced.node), target.dtype, target.shape)
        return counter, first


def words_at(key: Tensor, counter: Tensor, shape: tuple[int, ...], offset: int = 0) -> Tensor:
    """The Squares words of counters counter + offset, counter + offset + 1, ... (row-major over shape) under
    key, lazily; key and counter are (4,) float64 limb tensors, offset + prod(shape) < 2**32. One CUSTOM kernel
    where the device has it (squares_words), the graph of limb arithmetic elsewhere."""
    n = _count(shape)
    start = limn.Tensor(np.array(limbs_of(offset)), dtype=dtypes.float64, device=counter.device)  # a leaf: one plan
    (words,) = custom_call.apply("squares_words", key, counter, start, n=n)  # serves every offset
    return words.reshape(shape)  # (n,) -> shape


# ---- the words as one CUSTOM op: a device's kernel (the c device's), or the graph above ----


def _words_signature(specs: list, params: dict) -> list:
    return [(dtypes.float64, (params["n"],))]


def _words_reference(arrays: list[np.ndarray], params: dict) -> list[np.ndarray]:
    """squares_words(key, counter, start; n): the words of counters counter + start + i, i < n (mod 2**64)."""
    key, counter, start = (limbs_value(a) for a in arrays)
    counters = np.arange(params["n"], dtype=np.uint64) + np.uint64((counter + start) & MASK64)  # wraps as uint64
    return [squares32_host(counters, key).astype(np.float64)]


def _words_composed(key: Tensor, counter: Tensor, start: Tensor, n: int) -> list[Tensor]:
    """squares_words in primitives: each counter's limbs summed column by column, then carried (< 3 * 2**16)."""
    index = np.arange(n, dtype=np.int64)
    low = limn.Tensor(index % LIMB, dtype=dtypes.float64, device=counter.device)  # (n,): i's limbs
    high = limn.Tensor(index // LIMB, dtype=dtypes.float64, device=counter.device)
    base = [counter[i] + start[i] for i in range(4)]  # (4,) + (4,) -> four 0-d limb sums
    counters = _carried([base[0] + low, base[1] + high, base[2] + low * 0, base[3] + low * 0])
    return [squares32(counters, (key[0], key[1], key[2], key[3]))]


custom.register(custom.CustomOp("squares_words", 1, _words_signature, _words_reference, _words_composed))


def _count(shape: tuple[int, ...]) -> int:
    n = int(np.prod(shape, dtype=np.int64))
    if n >= 2**32:
        raise ArgumentError(f"random numbers: {n} numbers in one draw is too many; draw at most 2**32 - 1 at once")
    return n


def limbs_value(limbs: np.ndarray) -> int:
    """The 64-bit integer of four 16-bit limbs, low first."""
    return sum(int(limb) << (16 * i) for i, limb in enumerate(limbs))


def _write(t: Tensor, values: np.ndarray) -> None:
    buf = t.node.arg
    get_device(buf.device).copyin(buf.handle, values.astype(buf.dtype.np))


# Whether draws that realize at the call (rand, randn, randint) run the generator's graph on the device
# (limn.capture sets it while it records a step, so the recording holds the draw) or take host_words.
on_device = False


@contextlib.contextmanager
def drawing_on_device() -> Iterator[None]:
    """Within it, rand/randn/randint draw through the device graph (see on_device)."""
    global on_device
    before, on_device = on_device, True
    try:
        yield
    finally:
        on_device = before


def settle() -> None:
    """Realizes every generator's pending advance (limn.capture does before it records a step, whose first
    draw must read written counter bytes)."""
    for g in list(_live):
        g.counter.realize()


_live: weakref.WeakSet[Generator] = weakref.WeakSet()  # every generator made, for settle()
_seed = 0
_generators: dict[str, Generator] = {}  # the default generator of each device, made on its first draw


def default_generator(device: str | None = None) -> Generator:
    """The generator limn.manual_seed seeds, for `device` (the current device when None): one per device,
    each starting the seed's stream on its first draw, so every device draws the same numbers."""
    name = device or current_device()
    if name not in _generators:
        _generators[name] = Generator(_seed, name)
    return _generators[name]


def manual_seed(seed: int) -> None:
    """Seeds every device's default generator (those made later too): each restarts the seed's stream."""
    global _seed
    _seed = int(seed)
    for g in _generators.values():
        g.manual_seed(seed)
