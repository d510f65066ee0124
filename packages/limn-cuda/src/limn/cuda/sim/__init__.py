"""cuda-sim: limn's CUDA C compiled with g++ against a small header and run on CPU threads, for tests and
for debugging a kernel without a GPU."""
