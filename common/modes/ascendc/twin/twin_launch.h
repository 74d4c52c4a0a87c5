// Portable twin of a kernel launch: blockDim host threads, one per AI Vector core.
//
// Plays the role of ACLRT_LAUNCH_KERNEL(kernel)(blockDim, stream, args...) followed by
// aclrtSynchronizeStream: every block runs the same kernel with its own GetBlockIdx(), and
// the call returns when all blocks are done, with each block's pipe timers.
//
// The twin is its own profiler: when $ASCENDC_TWIN_TIMINGS names a file, every launch's per-block
// timers are written there as CSV when the program exits (as msprof collects on an NPU, without the
// host program doing anything). The lab sets it; the pyasc twin writes the same columns.
#pragma once

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "twin_runtime.h"

namespace twin {

struct LaunchTiming {
    uint64_t start_unix_ns = 0;  // wall-clock start, for op_summary's Task Start Time
    uint64_t wall_ns = 0;        // launch to last block done (op_summary's Task Duration)
    std::vector<BlockTiming> blocks;
};

// Every launch of this process, written to $ASCENDC_TWIN_TIMINGS (if set) when the program exits.
class TimingLog {
public:
    void Add(const LaunchTiming& launch) { launches_.push_back(launch); }
    ~TimingLog() {
        const char* path = std::getenv("ASCENDC_TWIN_TIMINGS");
        if (path == nullptr || *path == '\0') return;
        FILE* out = std::fopen(path, "w");
        if (out == nullptr) {
            std::fprintf(stderr, "twin: cannot write ASCENDC_TWIN_TIMINGS=%s\n", path);
            return;
        }
        std::fprintf(out, "launch,block,start_unix_ns,wall_ns,kernel_ns,region_ns,mte2_ns,vec_ns,mte3_ns\n");
        for (size_t l = 0; l < launches_.size(); ++l)
            for (size_t b = 0; b < launches_[l].blocks.size(); ++b) {
                const BlockTiming& t = launches_[l].blocks[b];
                std::fprintf(out, "%zu,%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                                  ",%" PRIu64 "\n",
                             l, b, launches_[l].start_unix_ns, launches_[l].wall_ns, t.kernel_ns, t.region_ns,
                             t.mte2_ns, t.vec_ns, t.mte3_ns);
            }
        std::fclose(out);
    }

private:
    std::vector<LaunchTiming> launches_;
};

inline TimingLog g_timing_log;

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
    g_timing_log.Add(result);
    return result;
}

}  // namespace twin
