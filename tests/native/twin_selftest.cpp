// TEST MATERIAL (not a kernel of the lab): exercises the portable twin's rules one at a time.
//
//   twin_selftest fp16-add        reads "aaaa bbbb" hex pairs on stdin, prints the fp16 sum's bits
//   twin_selftest fp16-round      reads decimal doubles on stdin, prints their fp16 bits
//   twin_selftest <scenario>      runs one tiny kernel on one block; misuse scenarios must abort
//
// tests/test_ascendc.py drives it and checks each message names the queue or tensor.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "kernel_operator.h"
#include "twin_launch.h"

namespace {

constexpr int32_t N = 64;  // elements per buffer: 128 B, four 32-byte blocks

struct Fixture {
    AscendC::TPipe pipe;
    AscendC::TQue<AscendC::QuePosition::VECIN, 2> inQueue;
    AscendC::TQue<AscendC::QuePosition::VECOUT, 1> outQueue;
    AscendC::GlobalTensor<half> xGm;
    AscendC::GlobalTensor<half> zGm;
    void Init(GM_ADDR x, GM_ADDR z) {
        xGm.SetGlobalBuffer((__gm__ half*)x, 2 * N);
        zGm.SetGlobalBuffer((__gm__ half*)z, 2 * N);
        pipe.InitBuffer(inQueue, 2, N * sizeof(half));
        pipe.InitBuffer(outQueue, 2, N * sizeof(half));  // 2 buffers, but depth 1
    }
};

std::string g_scenario;

void Scenario(GM_ADDR x, GM_ADDR z) {
    Fixture f;
    f.Init(x, z);
    const std::string& s = g_scenario;
    if (s == "ok") {  // a correct CopyIn -> Compute -> CopyOut, so the harness itself is shown to pass
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        AscendC::DataCopy(a, f.xGm, N);
        f.inQueue.EnQue(a);
        AscendC::LocalTensor<half> b = f.inQueue.DeQue<half>();
        AscendC::LocalTensor<half> c = f.outQueue.AllocTensor<half>();
        AscendC::Add(c, b, b, N);
        f.outQueue.EnQue(c);
        f.inQueue.FreeTensor(b);
        AscendC::LocalTensor<half> d = f.outQueue.DeQue<half>();
        AscendC::DataCopy(f.zGm[N], d, N);
        f.outQueue.FreeTensor(d);
    } else if (s == "alloc-over-depth") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        AscendC::LocalTensor<half> b = f.inQueue.AllocTensor<half>();
        AscendC::LocalTensor<half> c = f.inQueue.AllocTensor<half>();  // third of two buffers
    } else if (s == "deque-empty") {
        AscendC::LocalTensor<half> a = f.inQueue.DeQue<half>();
    } else if (s == "enque-over-depth") {
        AscendC::LocalTensor<half> a = f.outQueue.AllocTensor<half>();
        AscendC::LocalTensor<half> b = f.outQueue.AllocTensor<half>();
        f.outQueue.EnQue(a);
        f.outQueue.EnQue(b);  // depth 1
    } else if (s == "tile-too-big") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        AscendC::DataCopy(a, f.xGm, 2 * N);  // 128 elements into a 64-element buffer
    } else if (s == "gm-past-end") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        AscendC::DataCopy(a, f.xGm[N + 16], N);  // 64 elements from a view with 48 left
    } else if (s == "partial-block") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        AscendC::DataCopy(a, f.xGm, 10);  // 20 bytes: not whole 32-byte blocks
    } else if (s == "free-twice") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        f.inQueue.FreeTensor(a);
        f.inQueue.FreeTensor(a);
    } else if (s == "free-wrong-queue") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        f.outQueue.FreeTensor(a);
    } else if (s == "missing-free") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        AscendC::DataCopy(a, f.xGm, N);
    } else if (s == "write-after-enque") {
        AscendC::LocalTensor<half> a = f.inQueue.AllocTensor<half>();
        f.inQueue.EnQue(a);
        AscendC::DataCopy(a, f.xGm, N);  // the consumer owns it now
    } else {
        std::fprintf(stderr, "unknown scenario %s\n", s.c_str());
        std::exit(2);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s fp16-add|fp16-round|<scenario>\n", argv[0]);
        return 2;
    }
    const std::string what = argv[1];
    if (what == "fp16-add") {
        unsigned a, b;
        while (std::scanf("%x %x", &a, &b) == 2) {
            const half sum = half::FromBits(static_cast<uint16_t>(a)) + half::FromBits(static_cast<uint16_t>(b));
            std::printf("%04x\n", sum.bits);
        }
        return 0;
    }
    if (what == "fp16-round") {
        double v;
        while (std::scanf("%lf", &v) == 1) std::printf("%04x\n", half(v).bits);
        return 0;
    }
    g_scenario = what;
    half x[2 * N], z[2 * N];
    for (auto& e : x) e = half(1.0);
    twin::Launch(Scenario, 1u, reinterpret_cast<GM_ADDR>(x), reinterpret_cast<GM_ADDR>(z));
    if (z[N].bits != 0x4000) {
        std::fprintf(stderr, "ok scenario computed 0x%04x, want 0x4000\n", z[N].bits);
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
