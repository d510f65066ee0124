"""Reads and writes at indices, composed from GATHER and SCATTER: x[index] and x[index] = value, the gather
and scatter family, embedding and one_hot."""
