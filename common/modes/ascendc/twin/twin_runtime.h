// Portable twin: per-block context, pipe timers and the one way to stop on misuse.
//
// Each simulated AI Vector core is one host thread. The thread-local BlockContext tells
// GetBlockIdx() which core it is and where its timers go. The timers split a block's time
// the way PipeUtilization splits an AI Vector core's cycles:
//   MTE2  GM -> UB copies (DataCopy into a LocalTensor)
//   V     vector instructions (Add)
//   MTE3  UB -> GM copies (DataCopy into a GlobalTensor)
//   the rest of the block's time is "scalar": loop control, queue bookkeeping, addresses.
// On the twin these run one after another on one thread; on an NPU they are separate units
// that overlap, which is why the twin's ratios sum to 1 and the NPU's need not.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <source_location>
#include <string>

namespace twin {

struct BlockTiming {
    uint64_t kernel_ns = 0;  // whole kernel body of this block
    uint64_t region_ns = 0;  // between MetricsProfStart() and MetricsProfStop()
    uint64_t mte2_ns = 0;
    uint64_t vec_ns = 0;
    uint64_t mte3_ns = 0;
};

struct BlockContext {
    int64_t block_idx = -1;
    int64_t block_num = 0;
    BlockTiming* timing = nullptr;
    uint64_t region_start_ns = 0;
    bool region_open = false;
};

inline thread_local BlockContext g_block;

inline uint64_t NowNs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

[[noreturn]] inline void Fatal(const std::string& what, const std::source_location& where) {
    std::string file = where.file_name();
    const auto slash = file.find_last_of('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    std::fprintf(stderr, "twin: error in block %lld at %s:%u: %s\n", static_cast<long long>(g_block.block_idx),
                 file.c_str(), static_cast<unsigned>(where.line()), what.c_str());
    std::fflush(stderr);
    std::abort();  // never continue with a broken pipeline: it would corrupt memory silently on an NPU
}

inline std::string ShortLocation(const std::source_location& where) {
    std::string file = where.file_name();
    const auto slash = file.find_last_of('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    return file + ":" + std::to_string(where.line());
}

inline bool IsIdentChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The variable name a call site gives an object, read back from the kernel source, so messages
// can say 'inQueueX' instead of "queue #0". Only used on the error path.
//   arg_after = true:  `pipe.InitBuffer(inQueueX, ...)` -> first argument after `call(`
//   arg_after = false: `xGm.SetGlobalBuffer(...)`       -> the object before `.call`
inline std::string NameAtCall(const std::source_location& where, const std::string& call, bool arg_after) {
    std::ifstream in(where.file_name());
    std::string line;
    for (unsigned n = 0; n < where.line() && std::getline(in, line); ++n) {
    }
    const auto at = line.find(call);
    if (!in || at == std::string::npos) return "";
    std::string name;
    if (arg_after) {
        size_t i = line.find('(', at);
        if (i == std::string::npos) return "";
        for (++i; i < line.size() && line[i] == ' '; ++i) {
        }
        for (; i < line.size() && IsIdentChar(line[i]); ++i) name += line[i];
    } else {
        size_t i = at;
        while (i > 0 && (line[i - 1] == '.' || line[i - 1] == '>' || line[i - 1] == '-')) --i;
        size_t end = i;
        while (i > 0 && IsIdentChar(line[i - 1])) --i;
        name = line.substr(i, end - i);
    }
    return name;
}

}  // namespace twin
