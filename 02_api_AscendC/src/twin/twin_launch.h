// Portable twin of a kernel launch: blockDim host threads, one per AI Vector core.
//
// Plays the role of ACLRT_LAUNCH_KERNEL(kernel)(blockDim, stream, args...) followed by
// aclrtSynchronizeStream: every block runs the same kernel with its own GetBlockIdx(), and
// the call returns when all blocks are done, with each block's pipe timers.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "twin_runtime.h"

namespace twin {

struct LaunchTiming {
    uint64_t start_unix_ns = 0;  // wall-clock start, for op_summary's Task Start Time
    uint64_t wall_ns = 0;        // launch to last block done (op_summary's Task Duration)
    std::vector<BlockTiming> blocks;
};

template <typename... Args>
LaunchTiming Launch(void (*kernel)(Args...), uint32_t block_dim, Args... args) {
    LaunchTiming result;
    result.blocks.resize(block_dim);
    std::vector<std::thread> cores;
    cores.reserve(block_dim);
    result.start_unix_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    const uint64_t start = NowNs();
    for (uint32_t idx = 0; idx < block_dim; ++idx) {
        cores.emplace_back([&, idx] {
            g_block = BlockContext{idx, block_dim, &result.blocks[idx], 0, false};
            const uint64_t t0 = NowNs();
            kernel(args...);
            result.blocks[idx].kernel_ns = NowNs() - t0;
            if (g_block.region_open) {
                std::fprintf(stderr, "twin: error in block %u: MetricsProfStart() without MetricsProfStop()\n", idx);
                std::abort();
            }
            g_block = BlockContext{};
        });
    }
    for (auto& core : cores) core.join();
    result.wall_ns = NowNs() - start;
    return result;
}

}  // namespace twin
