// Portable twin of the AscendC API subset that add_kernel.cpp uses, part 1: qualifiers, sizes, block ids, the
// MetricsProfStart/Stop region. kernel_operator.h includes all three parts.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "twin_half.h"
#include "twin_runtime.h"

// Kernel qualifiers mean nothing on the host.
#define __global__
#define __aicore__
#define __gm__
using GM_ADDR = uint8_t*;
using half = twin::half;

namespace AscendC {

using SrcLoc = std::source_location;

// Unified Buffer of one AI Vector core on Atlas A2 (910B): 192 KiB.
constexpr uint32_t UB_BYTES = 192 * 1024;
// DataCopy moves data in 32-byte blocks; lengths must be whole blocks.
constexpr uint32_t DATA_BLOCK_BYTES = 32;

enum class TPosition { GM, VECIN, VECOUT, VECCALC };
using QuePosition = TPosition;

inline int64_t GetBlockIdx() { return twin::g_block.block_idx; }
inline int64_t GetBlockNum() { return twin::g_block.block_num; }

// msprof op collects PMU data only between these two calls; the twin times the same region.
inline void MetricsProfStart(const SrcLoc where = SrcLoc::current()) {
    if (twin::g_block.region_open) twin::Fatal("MetricsProfStart() called twice without MetricsProfStop()", where);
    twin::g_block.region_open = true;
    twin::g_block.region_start_ns = twin::NowNs();
}
inline void MetricsProfStop(const SrcLoc where = SrcLoc::current()) {
    if (!twin::g_block.region_open) twin::Fatal("MetricsProfStop() without a MetricsProfStart()", where);
    twin::g_block.region_open = false;
    if (twin::g_block.timing) twin::g_block.timing->region_ns += twin::NowNs() - twin::g_block.region_start_ns;
}

}  // namespace AscendC
