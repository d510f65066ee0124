"""The C++20 header that lets CUDA C compile with g++ and run on CPU threads (the cuda-sim device's half of CUDA).

SHIM goes in front of a CudaProgram's source. It spells the CUDA qualifiers as nothing (or as `static`, for
`__shared__`), the thread coordinates as thread-local and per-launch globals, `__syncthreads()` as a
std::barrier over the block's threads, atomics through std::atomic_ref, the bit casts through std::bit_cast,
and the math through <cmath>. It defines LIMN_CUDA_SIM 1, so a prelude can `#ifdef` away typedefs that
<cstdint> already supplies here (int64_t and friends) and headers the sim lacks (cuda_fp16.h).

What running under it checks: index arithmetic, bounds guards, grid-stride and tiling coverage, barrier
placement (every thread of a block waiting at one `__syncthreads()` is required to wait at the same line, or
the launch fails naming both lines), and atomics on small shapes. What it does not model: the GPU's memory
system (no coalescing, banks, caches or capacity limits), warps (no lockstep, no shuffles, no `__syncwarp`),
timing, and memory ordering beyond std::atomic_ref (its atomics are sequentially consistent, stronger than
CUDA's relaxed ones, so a kernel missing a fence can pass here and fail on a GPU).
Pipeline: IR -> CUDA C (cuda/source.py) -> CudaProgram -> **this** + cuda/sim/device.py -> g++ -> CPU threads.
"""

from __future__ import annotations

# Rules the text relies on, which cuda/sim/device.py's launchers keep:
# - blocks run one at a time, all of a block's threads at once, one std::thread each. So `__shared__` can be
#   `static`: a function-local static is one object for every thread of the block, and the next block reuses
#   it after the last one has finished (shared memory's lifetime on a GPU too).
# - one launch runs at a time per loaded library (SimModule holds a lock), since blockDim, gridDim, the
#   dynamic shared buffer and the static `__shared__` objects are the library's, not the launch's.
# - all state has internal linkage (an anonymous namespace): g++ would make `inline` variables unique across
#   every library in the process, so two loaded programs would share one blockDim.
# - a thread that returns drops out of the block's barrier (arrive_and_drop), as an exited thread stops
#   counting towards bar.sync on a GPU: `if (i >= n) return;` before a barrier does not hang the sim.
SHIM = r"""
#define LIMN_CUDA_SIM 1

#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static /* one object per block: blocks run one at a time */
#define __syncthreads() ::limn_sim::sync_threads(__LINE__)

struct dim3 {
    unsigned int x, y, z;
};

namespace {
thread_local dim3 threadIdx{0, 0, 0};
thread_local dim3 blockIdx{0, 0, 0};
dim3 blockDim{1, 1, 1};
dim3 gridDim{1, 1, 1};
}  // namespace

namespace limn_sim {
namespace {
char error[512];           // why the last launch failed, for limn_sim_error()
void* dynamic_shared;      // the `extern __shared__` array's storage for this launch

// One block's threads: where each waits (a __LINE__, or -1 once it has returned), and the barrier they meet at.
struct Team;
struct CheckPlacement {
    Team* team;
    void operator()() noexcept;
};
struct Team {
    explicit Team(unsigned size) : where(size, 0), barrier(size, CheckPlacement{this}) {}
    std::vector<int> where;
    std::barrier<CheckPlacement> barrier;
    bool diverged = false;
};
Team* team;  // the running block's

// Runs once per phase, after every thread still running has arrived and before any is released.
void CheckPlacement::operator()() noexcept {
    int line = -1;
    for (std::size_t t = 0; t < team->where.size(); ++t) {
        int at = team->where[t];
        if (at < 0) continue;
        if (line >= 0 && at != line && !team->diverged) {
            team->diverged = true;
            snprintf(error, sizeof error,
                     "block %u: threads wait at different __syncthreads() (program.cu lines %d and %d, "
                     "thread %zu at the second); every thread of a block must reach the same barrier",
                     blockIdx.x, line, at, t);
        }
        line = at;
    }
}

void sync_threads(int line) {
    team->where[threadIdx.x] = line;
    team->barrier.arrive_and_wait();
}

// Runs `kernel` over `grid` blocks of `block` threads, one block at a time; 0, or 1 with `error` set.
template <class Kernel>
int launch(unsigned grid, unsigned block, std::size_t shared_bytes, Kernel kernel) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    std::vector<std::max_align_t> shared((shared_bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
    dynamic_shared = shared.data();
    for (unsigned b = 0; b < grid; ++b) {
        Team block_team(block);
        team = &block_team;
        std::vector<std::thread> threads;
        threads.reserve(block);
        unsigned started = 0;
        try {
            for (; started < block; ++started) {
                threads.emplace_back([&kernel, &block_team, b, t = started] {
                    threadIdx = {t, 0, 0};
                    blockIdx = {b, 0, 0};
                    kernel();
                    block_team.where[t] = -1;
                    block_team.barrier.arrive_and_drop();
                });
            }
        } catch (const std::exception& e) {
            snprintf(error, sizeof error, "block %u: could not start thread %u of %u (%s)", b, started, block,
                     e.what());
            for (unsigned t = started; t < block; ++t) block_team.barrier.arrive_and_drop();
        }
        for (auto& thread : threads) thread.join();
        if (started < block || block_team.diverged) return 1;
    }
    return 0;
}
}  // namespace
}  // namespace limn_sim

extern "C" __attribute__((visibility("default"))) const char* limn_sim_error() { return limn_sim::error; }

// ---- atomics: std::atomic_ref, sequentially consistent; each returns the old value as CUDA's do ----
#define LIMN_SIM_ATOMIC_ADD(T) \
    inline T atomicAdd(T* address, T value) { return std::atomic_ref<T>(*address).fetch_add(value); }
LIMN_SIM_ATOMIC_ADD(float)
LIMN_SIM_ATOMIC_ADD(double)
LIMN_SIM_ATOMIC_ADD(int)
LIMN_SIM_ATOMIC_ADD(unsigned int)
LIMN_SIM_ATOMIC_ADD(long)
LIMN_SIM_ATOMIC_ADD(unsigned long)
LIMN_SIM_ATOMIC_ADD(long long)
LIMN_SIM_ATOMIC_ADD(unsigned long long)

#define LIMN_SIM_ATOMIC_CAS_MAX_MIN(T)                                         \
    inline T atomicCAS(T* address, T compare, T value) {                       \
        std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);  \
        return compare; /* the old value, whether or not it matched */         \
    }                                                                          \
    inline T atomicMax(T* address, T value) {                                  \
        std::atomic_ref<T> cell(*address);                                     \
        T old = cell.load();                                                   \
        while (old < value && !cell.compare_exchange_weak(old, value)) {       \
        }                                                                      \
        return old;                                                            \
    }                                                                          \
    inline T atomicMin(T* address, T value) {                                  \
        std::atomic_ref<T> cell(*address);                                     \
        T old = cell.load();                                                   \
        while (value < old && !cell.compare_exchange_weak(old, value)) {       \
        }                                                                      \
        return old;                                                            \
    }
LIMN_SIM_ATOMIC_CAS_MAX_MIN(int)
LIMN_SIM_ATOMIC_CAS_MAX_MIN(unsigned int)
LIMN_SIM_ATOMIC_CAS_MAX_MIN(unsigned long long)
LIMN_SIM_ATOMIC_CAS_MAX_MIN(long long)

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- bit casts ----
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }
inline float __uint_as_float(unsigned int x) { return std::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }

// ---- math: <cmath> supplies expf, logf, sqrtf, fmaf, exp, log, sqrt, fma, INFINITY and NAN ----
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
template <class T> inline T __ldg(const T* address) { return *address; }
using std::max;
using std::min;
"""
