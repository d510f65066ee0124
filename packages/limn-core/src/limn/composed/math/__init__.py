"""Elementwise math composed from the primitives: arithmetic and comparisons, exp/log, trig, powers,
rounding, bitwise ops, and the exact and numerically careful helpers they share."""
