"""The rewrites the C renderer may apply to a loop nest: threads, register-tiled matmuls, split epilogues,
jammed and chunked folds, pad splitting and hoisting. Each keeps the nest's answer bit for bit; table.py says
which a loop takes."""
