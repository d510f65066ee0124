"""limn-cuda: the cuda device. It renders the loop-nest IR as CUDA C, compiles it with NVRTC and launches it
through the driver API. Pipeline: tensor -> graph -> schedule -> IR -> **CUDA renderer -> cuda device**."""
