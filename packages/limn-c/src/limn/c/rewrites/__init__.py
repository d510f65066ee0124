"""The rewrites the C renderer may apply to a loop nest: threads, jammed and chunked folds, hoisting, pad
splitting and register-tiled matmuls. Each keeps the nest's answer bit for bit."""
