"""limn-c: the c device. It renders the loop-nest IR as C, compiles it with cc, and calls it through ctypes.
Pipeline: tensor -> graph -> schedule -> IR -> **C renderer -> c device**."""
