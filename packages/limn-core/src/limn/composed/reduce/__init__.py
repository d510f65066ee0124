"""Reductions composed from SUM and MAX: sum, mean, var, softmax and the rest, scans (cumsum, cummax),
sorting and what is built on it, and einsum."""
