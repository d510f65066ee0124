"""Movement composed from VIEW: shaping (expand, transpose, cat, split), rearranging (flip, roll, repeat),
triangles and diagonals, and padding with torch's modes."""
