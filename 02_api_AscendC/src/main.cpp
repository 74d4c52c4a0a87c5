/**
 * Host program for add_custom: prepare x = y = 1.0 (fp16), launch the kernel, check z.
 *
 *   add_custom_main [--launches N] [--warmup W] [--device D] [--timings FILE]
 *
 * Every launch is verified element by element (fp16 1.0 + 1.0 = 2.0, bits 0x4000); the first
 * mismatches are printed and the exit code is 1. Under msprof, each launch becomes one row of
 * op_summary. --device D is the logical device (0..N-1) the NPU build selects with aclrtSetDevice(D);
 * --timings (portable twin only) writes the twin's per-block pipe timers.
 * Before the first launch it prints the sizes it was built with (add_sizes.h) on a "kernel sizes:" line.
 */
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "add_sizes.h"       // the kernel's sizes, shared with add_kernel.cpp
#include "twin/twin_half.h"  // only for printing fp16 bits as numbers; plain C++, no twin runtime

namespace {

constexpr size_t kTotalLength = TOTAL_LENGTH;  // elements in x, y and z
constexpr uint32_t kBlockDim = USE_CORE_NUM;   // one block per AI Vector core
constexpr uint16_t kOne = 0x3C00;       // fp16 1.0
constexpr uint16_t kExpected = 0x4000;  // fp16 2.0 = 1.0 + 1.0, exactly
constexpr uint16_t kSentinel = 0x7E01;  // a NaN written into z before each launch: an untouched element fails
constexpr size_t kBytes = kTotalLength * sizeof(uint16_t);

}  // namespace

// =====================================================================================
// THE switch between the NPU and the CPU run. CMake's RUN_MODE defines exactly one:
//   LAB_RUN_NPU        npu       ACL runtime + ACLRT_LAUNCH_KERNEL on the logical device --device D
//   LAB_RUN_PORTABLE   portable  the twin in src/twin/: one host thread per block, pipe timers
// Each branch defines the same class Device { explicit Device(int id); Timing Run(x, y, z); }.
// =====================================================================================
#if defined(LAB_RUN_NPU)
#include "device_npu.h"  // class Device on the ACL runtime (the only branch that needs CANN)
#elif defined(LAB_RUN_PORTABLE)
#include "twin/twin_launch.h"
extern "C" void add_custom(uint8_t* x, uint8_t* y, uint8_t* z);

namespace {

using Timing = twin::LaunchTiming;

class Device {
public:
    explicit Device(int) : x_(kTotalLength), y_(kTotalLength), z_(kTotalLength) {}
    Timing Run(const std::vector<uint16_t>& x, const std::vector<uint16_t>& y, std::vector<uint16_t>& z) {
        x_ = x;  // "GM" is host memory here; copying keeps the kernel's inputs apart from the caller's
        y_ = y;
        z_ = z;
        Timing t = twin::Launch(add_custom, kBlockDim, Gm(x_), Gm(y_), Gm(z_));
        z = z_;
        return t;
    }

private:
    static uint8_t* Gm(std::vector<uint16_t>& v) { return reinterpret_cast<uint8_t*>(v.data()); }
    std::vector<uint16_t> x_, y_, z_;
};

}  // namespace
#define LAB_HAS_TWIN_TIMERS 1

#else
#error "define one of LAB_RUN_NPU, LAB_RUN_PORTABLE (CMake's RUN_MODE does this)"
#endif
// =====================================================================================

namespace {

struct Options {
    int launches = 1;
    int warmup = 0;
    int device = 0;
    std::string timings;
};

bool ParseInt(const char* text, int low, int high, int& out) {
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < low || value > high) return false;
    out = static_cast<int>(value);
    return true;
}

bool ParseArgs(int argc, char** argv, Options& opt) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
        bool ok = value != nullptr;
        if (arg == "--launches" && ok) ok = ParseInt(value, 1, 100000, opt.launches);
        else if (arg == "--warmup" && ok) ok = ParseInt(value, 0, 100000, opt.warmup);
        else if (arg == "--device" && ok) ok = ParseInt(value, 0, 63, opt.device);
        else if (arg == "--timings" && ok) opt.timings = value;
        else ok = false;
        if (!ok) {
            std::fprintf(stderr,
                         "Error: bad argument '%s' — usage: %s [--launches N] [--warmup W] [--device D] "
                         "[--timings FILE]\n",
                         arg.c_str(), argv[0]);
            return false;
        }
        ++i;
    }
    return true;
}

// Every element, not a sample: a kernel that gets one tile wrong must fail.
bool Verify(const std::vector<uint16_t>& z, int launch) {
    constexpr size_t kShow = 8;
    size_t bad = 0;
    for (size_t i = 0; i < z.size(); ++i) {
        if (z[i] == kExpected) continue;
        if (bad == 0) std::printf("verification FAILED in launch %d; first mismatches (index, expected, actual):\n", launch);
        if (bad < kShow)
            std::printf("  index %zu: expected 0x%04x (%g), actual 0x%04x (%g)\n", i, kExpected,
                        twin::HalfBitsToDouble(kExpected), z[i], twin::HalfBitsToDouble(z[i]));
        ++bad;
    }
    if (bad) std::printf("  %zu of %zu elements differ\n", bad, z.size());
    return bad == 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    if (!ParseArgs(argc, argv, opt)) return 2;
#ifndef LAB_HAS_TWIN_TIMERS
    if (!opt.timings.empty()) {
        std::fprintf(stderr, "Error: --timings needs the portable twin — on an NPU, msprof measures the kernel\n");
        return 2;
    }
#endif
    // The sizes this program was built with: the lab reads this line rather than keep its own copy.
    std::printf("kernel sizes: total_length=%" PRId32 " block_dim=%" PRId32 " block_length=%" PRId32
                " tile_num=%" PRId32 " buffer_num=%" PRId32 " tile_length=%" PRId32 "\n",
                TOTAL_LENGTH, USE_CORE_NUM, BLOCK_LENGTH, TILE_NUM, BUFFER_NUM, TILE_LENGTH);
    const std::vector<uint16_t> x(kTotalLength, kOne);
    const std::vector<uint16_t> y(kTotalLength, kOne);
    std::vector<uint16_t> z(kTotalLength);
    std::vector<Timing> measured;
    try {
        Device device(opt.device);
        for (int i = 0; i < opt.warmup + opt.launches; ++i) {
            z.assign(kTotalLength, kSentinel);
            Timing t = device.Run(x, y, z);
            if (!Verify(z, i)) return 1;
            if (i >= opt.warmup) measured.push_back(t);  // warm-up launches pay for first-touch costs
        }
    } catch (const std::exception& err) {
        std::fprintf(stderr, "Error: %s\n", err.what());
        return 1;
    }
#ifdef LAB_HAS_TWIN_TIMERS
    if (!opt.timings.empty()) {
        FILE* out = std::fopen(opt.timings.c_str(), "w");
        if (!out) {
            std::fprintf(stderr, "Error: cannot write %s\n", opt.timings.c_str());
            return 1;
        }
        std::fprintf(out, "launch,block,start_unix_ns,wall_ns,kernel_ns,region_ns,mte2_ns,vec_ns,mte3_ns\n");
        for (size_t l = 0; l < measured.size(); ++l)
            for (size_t b = 0; b < measured[l].blocks.size(); ++b) {
                const twin::BlockTiming& t = measured[l].blocks[b];
                std::fprintf(out, "%zu,%zu,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                                  ",%" PRIu64 "\n",
                             l, b, measured[l].start_unix_ns, measured[l].wall_ns, t.kernel_ns, t.region_ns,
                             t.mte2_ns, t.vec_ns, t.mte3_ns);
            }
        std::fclose(out);
    }
#endif
    std::printf("verified: %zu of %zu elements equal 0x%04x in each of %d launches (%d warm-up + %d measured)\n",
                kTotalLength, kTotalLength, kExpected, opt.warmup + opt.launches, opt.warmup, opt.launches);
    return 0;
}
