"""Randomness: a counter-based generator composed from the primitives, and the distributions drawn from it."""
