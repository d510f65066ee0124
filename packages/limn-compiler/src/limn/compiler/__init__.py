"""limn-compiler: the scheduler that fuses an op graph into kernels, the loop-nest IR they lower to, the
C-family spellings both renderers share, and the executor that plans and caches compiled kernels.
Pipeline: tensor -> graph -> **schedule -> IR** -> renderer -> device."""
