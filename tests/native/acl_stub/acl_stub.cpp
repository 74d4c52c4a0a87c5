// TEST MATERIAL: a recording stand-in for the ACL runtime, linked with main.cpp's NPU branch by
// tests/test_ascendc_hygiene.py. It is not an NPU: "device memory" is host memory and the kernel
// launch adds the fp16 inputs on the host. What it adds is bookkeeping:
//   LAB_ACL_LOG=<file>          one line per event: "call <name>", "acquire <kind> <id>",
//                               "release <kind> <id>", "fail <name>", "bad <what>"
//   LAB_ACL_FAIL_AT=<n>         the n-th (0-based) acquiring or working call returns an error
//   LAB_ACL_FAIL_RELEASE=<name> every call of that release function returns an error (and releases nothing)
// Streams and buffers are real heap allocations, so under AddressSanitizer a missing release is a
// reported leak and a double release a reported double free, besides showing in the log.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "acl/acl.h"
#include "aclrtlaunch_add_custom.h"
#include "twin_half.h"  // the portable twin's fp16 (common/modes/ascendc/twin)

namespace {

constexpr aclError kInjected = 507899;

struct Recorder {
    FILE* log = nullptr;
    long fail_at = -1;
    long count = 0;
    std::string fail_release;
    bool initialized = false;
    std::set<int32_t> devices;
    std::set<void*> streams;
    std::map<void*, size_t> buffers;
    const char* last_error = nullptr;

    Recorder() {
        if (const char* path = std::getenv("LAB_ACL_LOG")) log = std::fopen(path, "w");
        if (const char* n = std::getenv("LAB_ACL_FAIL_AT")) fail_at = std::strtol(n, nullptr, 10);
        if (const char* r = std::getenv("LAB_ACL_FAIL_RELEASE")) fail_release = r;
    }
    ~Recorder() {
        if (log) std::fclose(log);
    }
    void Line(const char* what, const char* name, const void* id = nullptr) {
        if (!log) return;
        if (id) std::fprintf(log, "%s %s %p\n", what, name, id);
        else std::fprintf(log, "%s %s\n", what, name);
        std::fflush(log);
    }
    // An acquiring or working call: counted, and failed when its turn comes.
    bool Fails(const char* name) {
        Line("call", name);
        if (count++ != fail_at) return false;
        Line("fail", name);
        last_error = "failure injected by the test stub";
        return true;
    }
    bool ReleaseFails(const char* name) {
        if (fail_release != name) return false;
        Line("fail", name);
        return true;
    }
};

Recorder& R() {
    static Recorder recorder;
    return recorder;
}

const void* DeviceId(int32_t id) { return reinterpret_cast<const void*>(static_cast<intptr_t>(id) + 1); }
const void* kSession = reinterpret_cast<const void*>(1);

}  // namespace

extern "C" {

aclError aclInit(const char*) {
    if (R().Fails("aclInit")) return kInjected;
    if (R().initialized) R().Line("bad", "aclInit-twice");
    R().initialized = true;
    R().Line("acquire", "session", kSession);
    return ACL_SUCCESS;
}

aclError aclFinalize() {
    if (R().ReleaseFails("aclFinalize")) return kInjected;
    if (!R().initialized || !R().devices.empty() || !R().streams.empty() || !R().buffers.empty())
        R().Line("bad", "aclFinalize-with-live-resources");
    R().initialized = false;
    R().Line("release", "session", kSession);
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t id) {
    if (R().Fails("aclrtSetDevice")) return kInjected;
    if (!R().initialized) R().Line("bad", "aclrtSetDevice-before-aclInit");
    R().devices.insert(id);
    R().Line("acquire", "device", DeviceId(id));
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t id) {
    if (R().ReleaseFails("aclrtResetDevice")) return kInjected;
    if (!R().devices.erase(id)) R().Line("bad", "aclrtResetDevice-unknown");
    if (!R().streams.empty() || !R().buffers.empty()) R().Line("bad", "aclrtResetDevice-with-live-resources");
    R().Line("release", "device", DeviceId(id));
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
    if (R().Fails("aclrtCreateStream")) return kInjected;
    *stream = new int(0);
    R().streams.insert(*stream);
    R().Line("acquire", "stream", *stream);
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (R().ReleaseFails("aclrtDestroyStream")) return kInjected;
    if (!R().streams.erase(stream)) R().Line("bad", "aclrtDestroyStream-unknown");
    R().Line("release", "stream", stream);
    delete static_cast<int*>(stream);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    if (R().Fails("aclrtSynchronizeStream")) return kInjected;
    if (!R().streams.count(stream)) R().Line("bad", "aclrtSynchronizeStream-unknown");
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void** ptr, size_t size, aclrtMemMallocPolicy) {
    if (R().Fails("aclrtMalloc")) return kInjected;
    *ptr = std::malloc(size);
    R().buffers[*ptr] = size;
    R().Line("acquire", "buffer", *ptr);
    return ACL_SUCCESS;
}

aclError aclrtFree(void* ptr) {
    if (R().ReleaseFails("aclrtFree")) return kInjected;
    if (!R().buffers.erase(ptr)) R().Line("bad", "aclrtFree-unknown");
    R().Line("release", "buffer", ptr);
    std::free(ptr);
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind) {
    if (R().Fails("aclrtMemcpy")) return kInjected;
    void* device_side = kind == ACL_MEMCPY_HOST_TO_DEVICE ? dst : const_cast<void*>(src);
    auto found = R().buffers.find(device_side);
    if (found == R().buffers.end() || count > dest_max || count > found->second) {
        R().Line("bad", "aclrtMemcpy-out-of-bounds");
        return 107000;
    }
    std::memcpy(dst, src, count);
    return ACL_SUCCESS;
}

const char* aclGetRecentErrMsg() { return R().last_error; }

uint32_t aclrtlaunch_add_custom(uint32_t, aclrtStream stream, void* x, void* y, void* z) {
    if (R().Fails("aclrtlaunch_add_custom")) return kInjected;
    if (!R().streams.count(stream) || !R().buffers.count(x) || !R().buffers.count(y) || !R().buffers.count(z)) {
        R().Line("bad", "launch-with-unknown-handles");
        return 107000;
    }
    const size_t n = R().buffers[z] / sizeof(uint16_t);
    auto* xs = static_cast<uint16_t*>(x);
    auto* ys = static_cast<uint16_t*>(y);
    auto* zs = static_cast<uint16_t*>(z);
    for (size_t i = 0; i < n; ++i)
        zs[i] = twin::DoubleToHalfBits(twin::HalfBitsToDouble(xs[i]) + twin::HalfBitsToDouble(ys[i]));
    return ACL_SUCCESS;
}

}  // extern "C"
