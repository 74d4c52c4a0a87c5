// TEST DOUBLE for the NPU dry run: a recording AscendCL runtime for main.cpp's NPU branch; never used outside tests.
// Built by the dry run's stand-in cmake with main.cpp (-DLAB_RUN_NPU) against the declarations in
// tests/native/acl_stub. Every call is appended to $NPU_DRYRUN_LOG (calls.jsonl) as
// {"tool":"ascendcl","call":"aclrtSetDevice","args":[3],...}. Device ids follow CANN's logical
// numbering: 0..N-1 with N = $NPU_DRYRUN_DEVICES (8), narrowed by ASCEND_RT_VISIBLE_DEVICES;
// an id outside it returns ACL_ERROR_RT_INVALID_DEVICEID (107001), a call before aclInit
// ACL_ERROR_UNINITIALIZE (100001). "Device memory" is host memory; the launch adds on the host.
#include <sys/file.h>
#include <unistd.h>

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

constexpr aclError kUninitialized = 100001;
constexpr aclError kRepeatInit = 100002;
constexpr aclError kParamInvalid = 107000;
constexpr aclError kInvalidDevice = 107001;
constexpr aclError kContextNull = 107002;

struct State {
    bool initialized = false;
    int device = -1;
    std::set<void*> streams;
    std::map<void*, size_t> buffers;
    const char* last_error = nullptr;
};

State& S() {
    static State state;
    return state;
}

std::string Escape(const char* text) {
    std::string out;
    for (const char* p = text ? text : ""; *p; ++p) {
        if (*p == '"' || *p == '\\') out += '\\';
        if (static_cast<unsigned char>(*p) >= 0x20) out += *p;
    }
    return out;
}

void Record(const char* call, const std::string& args, aclError rc) {
    const char* path = std::getenv("NPU_DRYRUN_LOG");
    if (!path) return;
    // The variables npu_dryrun_record.ENV_KEYS records, when set.
    static const char* const kEnvKeys[] = {"ASCEND_RT_VISIBLE_DEVICES", "ASCEND_PROCESS_LOG_PATH",
                                           "ASCEND_GLOBAL_LOG_LEVEL"};
    std::string env;
    for (const char* key : kEnvKeys) {
        const char* value = std::getenv(key);
        if (!value) continue;
        if (!env.empty()) env += ",";
        env += std::string("\"") + key + "\":\"" + Escape(value) + "\"";
    }
    std::string under;
    if (const char* value = std::getenv("NPU_DRYRUN_UNDER")) under = std::string(",\"under\":\"") + Escape(value) + "\"";
    char line[4096];
    std::snprintf(line, sizeof line,
                  "{\"tool\":\"ascendcl\",\"call\":\"%s\",\"args\":[%s],\"env\":{%s},\"pid\":%d,\"ppid\":%d%s,\"rc\":%d}\n",
                  call, args.c_str(), env.c_str(), static_cast<int>(getpid()), static_cast<int>(getppid()),
                  under.c_str(), rc);
    FILE* f = std::fopen(path, "a");
    if (!f) return;
    flock(fileno(f), LOCK_EX);
    std::fputs(line, f);
    std::fflush(f);
    flock(fileno(f), LOCK_UN);
    std::fclose(f);
}

int LogicalCount() {
    const char* n = std::getenv("NPU_DRYRUN_DEVICES");
    const int physical = n ? std::atoi(n) : 8;
    const char* visible = std::getenv("ASCEND_RT_VISIBLE_DEVICES");
    if (!visible) return physical;
    int count = 0;
    std::string list(visible);
    size_t start = 0;
    while (start <= list.size()) {
        const size_t end = list.find(',', start);
        const std::string item = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos && std::atoi(item.c_str()) < physical)
            ++count;
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return count;
}

aclError Done(const char* call, const std::string& args, aclError rc, const char* why = nullptr) {
    if (rc != ACL_SUCCESS) S().last_error = why;
    Record(call, args, rc);
    return rc;
}

}  // namespace

extern "C" {

aclError aclInit(const char*) {
    if (S().initialized) return Done("aclInit", "", kRepeatInit, "aclInit called twice");
    S().initialized = true;
    return Done("aclInit", "", ACL_SUCCESS);
}

aclError aclFinalize() {
    if (!S().initialized) return Done("aclFinalize", "", kUninitialized, "aclFinalize before aclInit");
    S().initialized = false;
    return Done("aclFinalize", "", ACL_SUCCESS);
}

aclError aclrtSetDevice(int32_t id) {
    const std::string args = std::to_string(id);
    if (!S().initialized) return Done("aclrtSetDevice", args, kUninitialized, "aclrtSetDevice before aclInit");
    if (id < 0 || id >= LogicalCount()) return Done("aclrtSetDevice", args, kInvalidDevice, "invalid device id");
    S().device = id;
    return Done("aclrtSetDevice", args, ACL_SUCCESS);
}

aclError aclrtResetDevice(int32_t id) {
    const std::string args = std::to_string(id);
    if (id != S().device) return Done("aclrtResetDevice", args, kInvalidDevice, "device was not set");
    S().device = -1;
    return Done("aclrtResetDevice", args, ACL_SUCCESS);
}

aclError aclrtCreateStream(aclrtStream* stream) {
    if (S().device < 0) return Done("aclrtCreateStream", "", kContextNull, "no device set");
    *stream = new int(0);
    S().streams.insert(*stream);
    return Done("aclrtCreateStream", "", ACL_SUCCESS);
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (!S().streams.erase(stream)) return Done("aclrtDestroyStream", "", kParamInvalid, "unknown stream");
    delete static_cast<int*>(stream);
    return Done("aclrtDestroyStream", "", ACL_SUCCESS);
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    if (!S().streams.count(stream)) return Done("aclrtSynchronizeStream", "", kParamInvalid, "unknown stream");
    return ACL_SUCCESS;  // once per launch: not logged, the launch is
}

aclError aclrtMalloc(void** ptr, size_t size, aclrtMemMallocPolicy policy) {
    const std::string args = std::to_string(size) + "," + std::to_string(static_cast<int>(policy));
    if (S().device < 0) return Done("aclrtMalloc", args, kContextNull, "no device set");
    *ptr = std::malloc(size);
    S().buffers[*ptr] = size;
    return Done("aclrtMalloc", args, ACL_SUCCESS);
}

aclError aclrtFree(void* ptr) {
    if (!S().buffers.erase(ptr)) return Done("aclrtFree", "", kParamInvalid, "unknown buffer");
    std::free(ptr);
    return Done("aclrtFree", "", ACL_SUCCESS);
}

aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind) {
    void* device_side = kind == ACL_MEMCPY_HOST_TO_DEVICE ? dst : const_cast<void*>(src);
    auto found = S().buffers.find(device_side);
    if (found == S().buffers.end() || count > dest_max || count > found->second)
        return Done("aclrtMemcpy", std::to_string(static_cast<int>(kind)), kParamInvalid, "memcpy out of bounds");
    std::memcpy(dst, src, count);
    return ACL_SUCCESS;
}

const char* aclGetRecentErrMsg() { return S().last_error; }

uint32_t aclrtlaunch_add_custom(uint32_t block_dim, aclrtStream stream, void* x, void* y, void* z) {
    const std::string args = "\"add_custom\"," + std::to_string(block_dim) + "," + std::to_string(S().device);
    if (!S().streams.count(stream) || !S().buffers.count(x) || !S().buffers.count(y) || !S().buffers.count(z))
        return Done("launch", args, kParamInvalid, "launch with unknown handles");
    const size_t n = S().buffers[z] / sizeof(uint16_t);
    auto* xs = static_cast<uint16_t*>(x);
    auto* ys = static_cast<uint16_t*>(y);
    auto* zs = static_cast<uint16_t*>(z);
    for (size_t i = 0; i < n; ++i)
        zs[i] = twin::DoubleToHalfBits(twin::HalfBitsToDouble(xs[i]) + twin::HalfBitsToDouble(ys[i]));
    return Done("launch", args, ACL_SUCCESS);
}

}  // extern "C"
