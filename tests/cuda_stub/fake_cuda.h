/*
 * fake_cuda.h -- the subset of the CUDA runtime that libpackboost_cuda uses,
 * run on host threads. Compiled with -DPBC_FAKE_CUDA by ci/cuda_on_cpu.sh
 * (g++ -std=c++20), it turns the .cu files into an ordinary shared library
 * whose kernels run block by block, one std::thread per CUDA thread, with
 * barriers for __syncthreads / __syncwarp and warp shuffles. Loaded in place
 * of the real library (LD_LIBRARY_PATH), it lets a machine without a GPU run
 * the GPU tests through the real C API, the real launchers and the real
 * kernel code: indexing, shared-memory layouts, chunking, reductions.
 *
 * What it cannot check: real concurrency between blocks, the GPU memory
 * model, timing. It is a test tool, never part of the package.
 */
#ifndef PACKBOOST_FAKE_CUDA_H
#define PACKBOOST_FAKE_CUDA_H

#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidDevice = 101,
};
typedef void *cudaStream_t;
typedef double *cudaEvent_t;
struct cudaDeviceProp {
    char name[256];
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
#define cudaStreamNonBlocking 1

namespace pbc_fake {

struct Block {
    explicit Block(unsigned int threads, size_t shared_bytes)
        : block_barrier((std::ptrdiff_t)threads), exchange(threads),
          shared((shared_bytes + 7) / 8 + 1)
    {
        for (unsigned int w = 0; w < (threads + 31) / 32; ++w) {
            unsigned int lanes = threads - 32 * w < 32 ? threads - 32 * w : 32;
            warp_barriers.emplace_back(new std::barrier<>((std::ptrdiff_t)lanes));
        }
    }
    std::barrier<> block_barrier;
    std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
    std::vector<unsigned long long> exchange;
    std::vector<unsigned long long> shared;
};

inline thread_local Block *current_block = nullptr;
inline thread_local dim3 thread_index, block_index;
inline dim3 block_dim, grid_dim;

template <class Body>
void launch(dim3 grid, dim3 block, size_t shared_bytes, Body body)
{
    grid_dim = grid;
    block_dim = block;
    for (unsigned int z = 0; z < grid.z; ++z)
        for (unsigned int y = 0; y < grid.y; ++y)
            for (unsigned int x = 0; x < grid.x; ++x) {
                Block state(block.x, shared_bytes);
                std::vector<std::thread> threads;
                threads.reserve(block.x);
                for (unsigned int t = 0; t < block.x; ++t)
                    threads.emplace_back([&, t, x, y, z] {
                        current_block = &state;
                        thread_index = dim3(t, 0, 0);
                        block_index = dim3(x, y, z);
                        body();
                    });
                for (auto &thread : threads)
                    thread.join();
            }
}

template <class Kernel>
auto launcher(dim3 grid, dim3 block, size_t shared_bytes, Kernel kernel)
{
    return [=](auto... args) { launch(grid, block, shared_bytes, [=] { kernel(args...); }); };
}

inline double now_ms()
{
    return std::chrono::duration<double, std::milli>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace pbc_fake

#define threadIdx (pbc_fake::thread_index)
#define blockIdx (pbc_fake::block_index)
#define blockDim (pbc_fake::block_dim)
#define gridDim (pbc_fake::grid_dim)

#define PBC_LAUNCH(kernel, grid, block, shared, stream) \
    pbc_fake::launcher(grid, block, shared, kernel)
#define PBC_DYNAMIC_SHARED(type, name) \
    type *name = reinterpret_cast<type *>(pbc_fake::current_block->shared.data())

inline void __syncthreads()
{
    pbc_fake::current_block->block_barrier.arrive_and_wait();
}

inline void __syncwarp(unsigned int = 0xffffffffu)
{
    pbc_fake::current_block->warp_barriers[threadIdx.x / 32]->arrive_and_wait();
}

template <class T>
T __shfl_xor_sync(unsigned int, T value, int offset)
{
    static_assert(sizeof(T) <= sizeof(unsigned long long), "shuffle of a wide type");
    pbc_fake::Block &block = *pbc_fake::current_block;
    const unsigned int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    std::memcpy(&block.exchange[threadIdx.x], &value, sizeof(T));
    block.warp_barriers[warp]->arrive_and_wait();
    T partner;
    std::memcpy(&partner, &block.exchange[warp * 32 + (lane ^ (unsigned int)offset)], sizeof(T));
    block.warp_barriers[warp]->arrive_and_wait();
    return partner;
}

inline unsigned long long atomicAdd(unsigned long long *address, unsigned long long value)
{
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}

inline unsigned int atomicAdd(unsigned int *address, unsigned int value)
{
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}

inline unsigned long long atomicMax(unsigned long long *address, unsigned long long value)
{
    unsigned long long old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (old < value
           && !__atomic_compare_exchange_n(address, &old, value, true, __ATOMIC_RELAXED,
                                           __ATOMIC_RELAXED)) {}
    return old;
}

inline long long __double2ll_rn(double x)
{
    return std::llrint(x);  /* default rounding: to nearest, ties to even */
}

using std::min;

inline cudaError_t cudaMalloc(void **pointer, size_t bytes)
{
    *pointer = std::calloc(bytes ? bytes : 1, 1);
    return *pointer ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <class T>
cudaError_t cudaMalloc(T **pointer, size_t bytes)
{
    return cudaMalloc(reinterpret_cast<void **>(pointer), bytes);
}
inline cudaError_t cudaFree(void *pointer) { std::free(pointer); return cudaSuccess; }
/* Pinned host memory is ordinary host memory here. */
inline cudaError_t cudaMallocHost(void **pointer, size_t bytes)
{
    return cudaMalloc(pointer, bytes);
}
inline cudaError_t cudaFreeHost(void *pointer) { std::free(pointer); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind)
{
    std::memcpy(to, from, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes, cudaMemcpyKind,
                                   cudaStream_t)
{
    std::memcpy(to, from, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *to, int value, size_t bytes, cudaStream_t)
{
    std::memset(to, value, bytes);
    return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int)
{
    *stream = reinterpret_cast<void *>(1);
    return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    *event = new double(0.0);
    return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) { delete event; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t)
{
    *event = pbc_fake::now_ms();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop)
{
    *ms = (float)(*stop - *start);
    return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
inline cudaError_t cudaGetDeviceCount(int *count) { *count = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *properties, int device)
{
    if (device != 0)
        return cudaErrorInvalidDevice;
    std::strcpy(properties->name, "fake CUDA device (host threads)");
    return cudaSuccess;
}
/* The fake device's memory: PBC_FAKE_DEVICE_MEMORY bytes free and in all
 * (16 GiB when unset), so that tests can make a request that cannot fit. */
inline cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    const char *setting = std::getenv("PBC_FAKE_DEVICE_MEMORY");
    *free_bytes = *total_bytes = setting ? (size_t)std::strtoull(setting, nullptr, 10)
                                         : (size_t)16 << 30;
    return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int *version) { *version = 13000; return cudaSuccess; }
inline cudaError_t cudaDriverGetVersion(int *version) { *version = 13000; return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "unknown error";
    }
}
inline cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr, int)
{
    *value = 227 * 1024;  /* an H100's opt-in shared memory per block */
    return cudaSuccess;
}
template <class Function>
cudaError_t cudaFuncSetAttribute(Function, cudaFuncAttribute, int)
{
    return cudaSuccess;
}

#endif /* PACKBOOST_FAKE_CUDA_H */
