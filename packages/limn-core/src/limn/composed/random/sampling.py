"""Random tensors from the device generator (limn.composed.random.rng): uniform, normal, integers, Bernoulli, dropout,
multinomial.

Each takes a shape (or a tensor whose shape and dtype it follows) and an optional `generator` (the device's
default one, which limn.manual_seed seeds, when None) and gives a Tensor computed on the device from the
generator's words. rand, randn and randint realize their numbers at the call, as torch makes them; bernoulli,
dropout and multinomial stay lazy, so a mask fuses into the kernel that uses it.
Pipeline: **tensor (sources)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.random import rng
from limn.composed.random.rng import Generator, default_generator
from limn.dtypes import DType
from limn.errors import ArgumentError
from limn.runtime.device import get_device
from limn.runtime.engine import realize

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

# the bits of a uniform number of each float dtype: k / 2**bits for k in [0, 2**bits) is exact in it
MANTISSA_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    out = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
    if any(s < 0 for s in out):
        raise ArgumentError(f"random numbers: shape {out} has a negative size; sizes must be >= 0")
    return out


def _generator(generator: Generator | None, device: str | None) -> Generator:
    if generator is None:
        return default_generator(device)
    if device is not None and generator.device != device:
        raise ArgumentError(f"random numbers: the generator is on {generator.device}, the tensor asked on {device}")
    return generator


def _drop_low_bits(x: Tensor, bits: int) -> Tensor:
    """floor(x / 2**bits), x an exact float64 integer in [0, 2**32) and bits >= 1: exact (see rng._floor_div)."""
    return (x * 2.0**-bits).cast(dtypes.int32).cast(dtypes.float64)


Words = Callable[[tuple[int, ...]], "Tensor"]  # Generator.words or Generator.host_words: shape -> float64 words


def _uniform_integers(shape: tuple[int, ...], bits: int, words: Words) -> Tensor:
    """float64 integers uniform in [0, 2**bits), bits <= 53: the top bits of one word (bits <= 32) or of
    two (53 bits: 32 from the first word of a pair, 21 from the second)."""
    if bits == 32:
        return words(shape)
    if bits < 32:
        return _drop_low_bits(words(shape), 32 - bits)
    pairs = words((*shape, 2))
    first, second = pairs[..., 0], pairs[..., 1]  # (..., 2) -> (...) each
    return first * 2.0 ** (bits - 32) + _drop_low_bits(second, 64 - bits)


def uniform(shape: tuple[int, ...], dtype: DType, words: Words, open_interval: bool = False) -> Tensor:
    """Lazy uniform numbers of a float dtype in [0, 1), as k / 2**bits (exact in dtype); in (0, 1) with
    open_interval, as (k + 1/2) / 2**bits, in float64 (for the normal's inverse CDF)."""
    if dtype.name not in MANTISSA_BITS:
        raise TypeError(
            f"random numbers: dtype must be a float (float32, float64, float16, bfloat16), got {dtype.name}"
        )
    bits = MANTISSA_BITS[dtype.name]
    if open_interval:
        # a float32 normal takes 32 bits (its tails reach 6.2 sigma); at most 52, so that k + 1/2 is exact
        bits = min(max(bits, 32), 52)
        return (_uniform_integers(shape, bits, words) + 0.5) * 2.0**-bits
    return (_uniform_integers(shape, bits, words) * 2.0**-bits).cast(dtype)


def dropout_factors(shape: tuple[int, ...], dtype: DType, p: float, words: Words) -> Tensor:
    """What dropout multiplies each value of `dtype` by: 1 / (1 - p) where it is kept, with probability 1 - p
    (a uniform number, float64 for float64 and float32 otherwise, at least p), and 0 where it is dropped. Tensor.dropout
    and fused attention's composition draw their masks here, so equal words give equal masks."""
    keep = uniform(shape, dtypes.float64 if dtype == dtypes.float64 else dtypes.float32, words).ge(p)
    return keep.cast(dtype) * (1.0 / (1.0 - p))


def rand(
    shape: Sequence[int] | int,
    *,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    requires_grad: bool = False,
    generator: Generator | None = None,
) -> Tensor:
    """Uniform in [0, 1), made on the device from the generator limn.manual_seed seeds (Squares,
    limn.composed.random.rng): k / 2**24 for float32 (2**53 for float64). The numbers are realized at this call; inside
    a step captured by limn.capture each replay draws fresh ones, the same as the uncaptured loop would.

    >>> Tensor.rand((2, 3)).shape
    (2, 3)
    """
    dtype = dtypes.as_dtype(dtype)
    return _drawn(_generator(generator, device), requires_grad, lambda words: uniform(_shape(shape), dtype, words))


def randn(
    shape: Sequence[int] | int,
    *,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    requires_grad: bool = False,
    generator: Generator | None = None,
) -> Tensor:
    """Standard normal by the inverse CDF (Wichura's AS241, accurate to ~1e-16) of a uniform in (0, 1) of 32
    bits (52 for float64), made on the device at this call (see rand)."""
    dtype = dtypes.as_dtype(dtype)
    g = _generator(generator, device)
    if dtype.name not in MANTISSA_BITS:
        raise TypeError(f"randn: dtype must be a float (float32, float64, float16, bfloat16), got {dtype.name}")

    def normal(words: Words) -> Tensor:
        return normal_icdf(uniform(_shape(shape), dtype, words, open_interval=True)).cast(dtype)

    return _drawn(g, requires_grad, normal)


def _floor(x: Tensor) -> Tensor:
    """floor(x) of a float64 in [0, 2**47), as two exact casts: the part above 2**16, then the rest."""
    high = (x * 2.0**-16).cast(dtypes.int32).cast(dtypes.float64) * 2.0**16
    return high + (x - high).cast(dtypes.int32).cast(dtypes.float64)


def _drawn(g: Generator, requires_grad: bool, make: Callable[[Words], Tensor]) -> Tensor:
    """The numbers make(words) computes, realized now as a new leaf on g's device. Recorded by limn.capture
    (rng.on_device), the words are g's device graph and the counter's advance stays pending until the step
    ends (see Generator.words), so a replay draws the next ones. Otherwise they are g.host_words (the same
    bits, made on the host) and the rest runs on the numpy reference device: an eager draw compiles nothing
    (tests/core/test_rng.py holds the two paths to the same numbers)."""
    if rng.on_device:
        out = make(g.words)
        realize(out)
        return limn.Tensor(out, requires_grad=requires_grad)
    out = make(g.host_words)
    return limn.Tensor(host_values(out), dtype=out.dtype, device=g.device, requires_grad=requires_grad)


def host_values(t: Tensor) -> np.ndarray:
    """t's values computed by the numpy reference device itself, whatever device is selected (realize runs
    host tensors on the selected one, which may compile), for a graph over host data only."""
    return get_device("numpy").run([t.node])[0].numpy()


# ---- the normal's inverse CDF: Wichura's AS241 (PPND16), three rational approximations ----

_CENTRAL = (  # |q| <= 0.425, r = 0.180625 - q^2: x = q A(r) / B(r)
    (3.3871328727963666080, 133.14166789178437745, 1971.5909503065514427, 13731.693765509461125,
     45921.953931549871457, 67265.770927008700853, 33430.575583588128105, 2509.0809287301226727),
    (1.0, 42.313330701600911252, 687.18700749205790830, 5394.1960214247511077,
     21213.794301586595867, 39307.895800092710610, 28729.085735721942674, 5226.4952788528544610),
)  # fmt: skip
_INTERMEDIATE = (  # r = sqrt(-log(min(p, 1 - p))) <= 5: x = C(r - 1.6) / D(r - 1.6)
    (1.42343711074968357734, 4.63033784615654529590, 5.76949722146069140550, 3.64784832476320460504,
     1.27045825245236838258, 0.241780725177450611770, 0.0227238449892691845833, 7.74545014278341407640e-4),
    (1.0, 2.05319162663775882187, 1.67638483018380384940, 0.689767334985100004550,
     0.148103976427480074590, 0.0151986665636164571966, 5.47593808499534494600e-4, 1.05075007164441684324e-9),
)  # fmt: skip
_TAIL = (  # r > 5: x = E(r - 5) / F(r - 5)
    (6.65790464350110377720, 5.46378491116411436990, 1.78482653991729133580, 0.296560571828504891230,
     0.0265321895265761230930, 0.00124266094738807843860, 2.71155556874348757815e-5, 2.01033439929228813265e-7),
    (1.0, 0.599832206555887937690, 0.136929880922735805310, 0.0148753612908506148525,
     7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7, 2.04426310338993978564e-15),
)  # fmt: skip


def _polynomial(x: Tensor, coefficients: Sequence[float]) -> Tensor:
    """c0 + c1 x + ... + c7 x^7, by Horner's rule."""
    out = x * 0 + coefficients[-1]
    for c in reversed(coefficients[:-1]):
        out = out * x + c
    return out


def _rational(x: Tensor, pair: tuple[Sequence[float], Sequence[float]]) -> Tensor:
    return _polynomial(x, pair[0]) / _polynomial(x, pair[1])


def normal_icdf(p: Tensor) -> Tensor:
    """The standard normal's quantile of p in (0, 1) (float64), AS241: relative error about 1e-16."""
    q = p - 0.5
    central = q * _rational(0.180625 - q * q, _CENTRAL)
    r = p.minimum(1 - p).log().neg().sqrt()  # sqrt(-log(min(p, 1 - p)))
    tail = r.lt(5.0).where(_rational(r - 1.6, _INTERMEDIATE), _rational(r - 5.0, _TAIL))
    tail = q.lt(0).where(tail.neg(), tail)
    return q.abs().le(0.425).where(central, tail)


class SamplingMixin:
    """Tensor's random numbers, drawn from the device generator: randint, randperm, the *_like draws, bernoulli,
    dropout, multinomial."""

    __slots__ = ()

    @staticmethod
    def randint(
        low: int,
        high: int | Sequence[int] | None = None,
        size: Sequence[int] | int | None = None,
        *,
        dtype: DType | str = dtypes.int32,
        device: str | None = None,
        generator: Generator | None = None,
    ) -> Tensor:
        """Integers uniform in [low, high), called as torch.randint(low, high, size) or randint(high, size):
        low + floor(u * (high - low)) of a 53-bit uniform u, int32 (limn's widest int) unless dtype says.
        Realized at this call (see rand).

        >>> bool((Tensor.randint(3, 10, (1000,)).numpy() >= 3).all()), Tensor.randint(5, (2, 3)).shape
        (True, (2, 3))
        """
        if high is None or isinstance(high, (tuple, list)):
            low, high, size = 0, low, high if size is None else size  # randint(high, size)
        low, high = int(low), int(high)
        dtype = dtypes.as_dtype(dtype)
        if high <= low:
            raise ArgumentError(f"randint: needs low < high, got low={low}, high={high}")
        if dtype.is_int and (low < np.iinfo(dtype.np).min or high - 1 > np.iinfo(dtype.np).max):
            raise ArgumentError(f"randint: the range [{low}, {high}) does not fit {dtype.name}")
        span, shape = float(high - low), _shape(() if size is None else size)

        def integers(words: Words) -> Tensor:
            u = _uniform_integers(shape, 53, words) * 2.0**-53
            k = _floor(u * span).clip(hi=span - 1)  # u * span can round up to span itself
            return (k + low).cast(dtype)

        return _drawn(_generator(generator, device), False, integers)

    def rand_like(self, *, dtype: DType | str | None = None, device: str | None = None, **kwargs) -> Tensor:
        """rand of x's shape, in x's dtype (a float) on x's device unless given."""
        return rand(self.shape, dtype=dtype or self.dtype, device=device or self.device, **kwargs)

    def randn_like(self, *, dtype: DType | str | None = None, device: str | None = None, **kwargs) -> Tensor:
        """randn of x's shape, in x's dtype (a float) on x's device unless given."""
        return randn(self.shape, dtype=dtype or self.dtype, device=device or self.device, **kwargs)

    def randint_like(self, low: int, high: int | None = None, *, dtype: DType | str | None = None, **kwargs) -> Tensor:
        """randint of x's shape, in x's dtype on x's device unless given."""
        return limn.Tensor.randint(
            low, high, self.shape, dtype=dtype or self.dtype, device=kwargs.pop("device", self.device), **kwargs
        )

    # ---- lazy draws: masks and samples that fuse into the kernel using them ----
    def bernoulli(self, p: float | None = None, *, generator: Generator | None = None) -> Tensor:
        """1 with probability x (or p when given: every entry p), else 0, in x's dtype, as torch.bernoulli; lazy.
        x must be a float tensor of probabilities in [0, 1]. u < p for a uniform u in [0, 1) of 24 bits
        (53 for float64), so p = 0 never and p = 1 always gives 1.

        >>> Tensor.zeros(4).bernoulli(1.0).tolist()
        [1.0, 1.0, 1.0, 1.0]
        """
        if not self.dtype.is_float:
            raise TypeError(f"bernoulli: needs a float tensor of probabilities, got {self.dtype.name}")
        g = _generator(generator, self.device)
        wide = dtypes.float64 if self.dtype == dtypes.float64 else dtypes.float32
        u = uniform(self.shape, wide, g.words)
        chance = self.cast(wide) if p is None else float(p)
        return u.lt(chance).cast(self.dtype)

    def dropout(self, p: float = 0.5, training: bool = True, *, generator: Generator | None = None) -> Tensor:
        """torch.nn.functional.dropout: in training each entry is zeroed with probability p and the others scaled
        by 1 / (1 - p), as x * mask / (1 - p) (so an inf where the mask is 0 gives NaN, as torch's); the mask is
        lazy and fuses into the kernel that uses it. Not training, or p = 0, it is x itself.

        >>> x = Tensor.ones(1000)
        >>> y = x.dropout(0.25).numpy()
        >>> sorted(set(y.tolist())), bool(0.2 < (y == 0).mean() < 0.3)
        ([0.0, 1.3333333730697632], True)
        """
        if not 0.0 <= p <= 1.0:
            raise ArgumentError(f"dropout: probability has to be between 0 and 1, but got {p}")
        if not training or p == 0.0:
            return self
        if not self.dtype.is_float:
            raise TypeError(f"dropout: needs a float tensor, got {self.dtype.name}")
        g = _generator(generator, self.device)
        if p == 1.0:
            return self * 0.0  # torch: every entry dropped, x * 0 (NaN for inf)
        return self * dropout_factors(self.shape, self.dtype, p, g.words)

    def multinomial(self, num_samples: int, replacement: bool = False, *, generator: Generator | None = None) -> Tensor:
        """Category indices (int32) drawn from the rows of `probs` ((K,) or (N, K), weights >= 0, not necessarily
        summing to 1), as torch.multinomial; lazy. By the Gumbel-max rule: argmax(log w + g) with g = -log(-log u)
        is category k with probability w_k / sum(w); without replacement the next sample is the argmax over the
        categories not yet drawn (Gumbel top-k). Cost: (N, num_samples, K) noise with replacement, num_samples
        argmaxes over (N, K) without. Trap: a row of all zeros gives category 0 (torch raises).

        >>> Tensor([0.0, 0.0, 1.0, 0.0]).multinomial(3, replacement=True).tolist()
        [2, 2, 2]
        """
        if self.ndim not in (1, 2) or not self.dtype.is_float:
            what = f"{self.dtype.name}{list(self.shape)}"
            raise ArgumentError(f"multinomial: probs must be a 1-d or 2-d float tensor, got {what}")
        k = self.shape[-1]
        if num_samples < 1 or (not replacement and num_samples > k):
            raise ArgumentError(
                f"multinomial: cannot draw {num_samples} samples from {k} categories without replacement"
            )
        g = _generator(generator, self.device)
        rows = self.reshape(-1, k).cast(dtypes.float64)  # (K,) or (N, K) -> (N, K)
        n = rows.shape[0]
        log_w = rows.log()  # -inf for a weight of 0: never drawn
        if replacement:
            u = uniform((n, num_samples, k), dtypes.float64, g.words, open_interval=True)
            scores = log_w.reshape(n, 1, k) + u.log().neg().log().neg()  # (N, S, K): log w + Gumbel noise
            index = scores.argmax(-1)  # (N, S)
        else:
            u = uniform((n, k), dtypes.float64, g.words, open_interval=True)
            scores = log_w + u.log().neg().log().neg()  # (N, K)
            picks = []
            for _ in range(num_samples):
                pick = scores.argmax(-1, keepdim=True)  # (N, 1)
                picks.append(pick)
                scores = limn.Tensor.arange(k, device=self.device).eq(pick).where(float("-inf"), scores)
            index = limn.Tensor.cat(picks, 1) if num_samples > 1 else picks[0]  # (N, S)
        return index if self.ndim == 2 else index.reshape(num_samples)

    @staticmethod
    def randperm(
        n: int, *, dtype: DType | str = dtypes.int32, device: str | None = None, generator: Generator | None = None
    ) -> Tensor:
        """A random permutation of 0..n-1, as torch.randperm: the indices in the order of n random words (ties
        by index). Realized at this call: eagerly by a host argsort of the host words; inside a captured step
        by ranks from an (n, n) compare (the same permutation), so there keep n to a few thousand.

        >>> sorted(Tensor.randperm(5).tolist())
        [0, 1, 2, 3, 4]
        """
        n = int(n)
        if n < 0:
            raise ArgumentError(f"randperm: n must be >= 0, got {n}")
        g = _generator(generator, device)
        dtype = dtypes.as_dtype(dtype)
        if not rng.on_device:
            keys = g.host_words((n,)).numpy()
            return limn.Tensor(np.argsort(keys, kind="stable"), dtype=dtype, device=g.device)
        keys = g.words((n,))
        index = limn.Tensor.arange(n, device=g.device)
        key_i, key_j = keys.reshape(n, 1), keys.reshape(1, n)  # (n, 1) and (1, n)
        before = key_j.lt(key_i).logical_or(key_j.eq(key_i).logical_and(index.reshape(1, n).lt(index.reshape(n, 1))))
        rank = before.cast(dtypes.int32).sum(1)  # (n, n) -> (n,): how many come before i
        at = rank.reshape(1, n).eq(index.reshape(n, 1))  # (n, n): row r marks the i of rank r
        out = at.where(index.reshape(1, n), 0).sum(1).cast(dtype)  # (n,): perm[r] = that i
        realize(out)
        return limn.Tensor(out)
