"""The device generator's words in C: Widynski's Squares as limn.composed.random.rng.squares32_host computes it,
and a 64-bit word from the generator's 16-bit limbs. The c and cuda devices' fused attention kernels take this
one text, each with its own function qualifier, to draw dropout's mask inside them.
Pipeline: IR -> renderer -> **the C and CUDA C the attention kernels share** -> device.
"""

from __future__ import annotations

SQUARES = r"""
/* a 64-bit word from a generator's four 16-bit limbs, low first */
QUALIFIER uint64_t limn_sdpa_word_of(const double* limbs) {
    uint64_t word = 0;
    for (int i = 3; i >= 0; i--) word = (word << 16) | (uint64_t)limbs[i];
    return word;
}

/* Widynski's Squares, the 32-bit output (limn.composed.random.rng.squares32_host), in wrapping uint64 arithmetic */
QUALIFIER uint32_t limn_sdpa_squares32(uint64_t ctr, uint64_t key) {
    uint64_t x = ctr * key;
    const uint64_t y = x, z = y + key;
    x = x * x + y;
    x = (x >> 32) | (x << 32);
    x = x * x + z;
    x = (x >> 32) | (x << 32);
    x = x * x + y;
    x = (x >> 32) | (x << 32);
    return (uint32_t)((x * x + z) >> 32);
}
"""


def squares_c(qualifier: str) -> str:
    """The two functions, each declared `qualifier` (C's "static inline", CUDA's "static __device__ ...")."""
    return SQUARES.replace("QUALIFIER", qualifier)
