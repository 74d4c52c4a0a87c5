/**
 * add_kernel.cpp: z = x + y on fp16, the classic AscendC vector kernel, written to be profiled.
 *
 * What you will do:
 *   - split 8192 elements over 8 AI Vector cores (blocks) and walk each core's slice tile by tile;
 *   - run every tile through a three-stage pipeline joined by queues in the Unified Buffer (UB):
 *       CopyIn   GM -> UB  (DataCopy, runs on the MTE2 pipe)
 *       Compute  UB -> UB  (Add, runs on the vector pipe, V)
 *       CopyOut  UB -> GM  (DataCopy, runs on the MTE3 pipe)
 *   - mark the tile loop with MetricsProfStart/Stop so that `msprof op` measures the loop only.
 *
 * What you will learn:
 *   - how double buffering works: with two buffers per queue, MTE2 fetches tile i+1 while V adds
 *     tile i and MTE3 stores tile i-1; the queues (TQue) carry the synchronisation;
 *   - which pipe bounds a kernel: msprof's PipeUtilization metrics give each pipe's share of the
 *     core's time (aiv_vec_ratio, aiv_scalar_ratio, aiv_mte2_ratio, aiv_mte3_ratio), where the
 *     scalar unit is the one that runs the loop and issues every instruction.
 *
 * This is the only kernel source. On an NPU, CMakeLists.txt compiles it with CANN's
 * ascendc_library; on the portable backend the host compiler builds the same file against CPU
 * stand-in headers of the AscendC API (RUN_MODE=portable, see CMakeLists.txt).
 */

// --- 1. The sizes: set once, here ----------------------------------------------------------------
// main.cpp includes this file with ADD_SIZES_ONLY defined to read this section and nothing else,
// so the host program allocates and launches exactly what the kernel walks. Plain constants and
// <cstdint> only: this part compiles for the AI Core and for the host alike.
#include <cstdint>

constexpr int32_t TOTAL_LENGTH = 8 * 1024;                             // elements in x, y and z
constexpr int32_t USE_CORE_NUM = 8;                                    // blockDim at launch
constexpr int32_t BLOCK_LENGTH = TOTAL_LENGTH / USE_CORE_NUM;          // elements per core: 1024
// Tiles per core and buffers per queue are build-time variants (cmake -DTILE_NUM=2 -DBUFFER_NUM=1): the fix
// for a kernel whose scalar part (the per-tile loop, addresses, queue handshakes) holds much of its time is
// fewer, larger tiles; double buffering (2) lets MTE2, V and MTE3 overlap on an NPU, where the pipes run at once.
#ifndef ADD_TILE_NUM
#define ADD_TILE_NUM 8
#endif
#ifndef ADD_BUFFER_NUM
#define ADD_BUFFER_NUM 2
#endif
constexpr int32_t TILE_NUM = ADD_TILE_NUM;                             // tiles per core
constexpr int32_t BUFFER_NUM = ADD_BUFFER_NUM;                         // double buffer: 2 buffers per queue
constexpr int32_t TILE_LENGTH = BLOCK_LENGTH / TILE_NUM / BUFFER_NUM;  // elements per buffer: 64

// A change above must still split evenly (every core a whole number of whole tiles), and DataCopy
// moves whole 32-byte blocks, so a tile of fp16 must be a multiple of 16 elements.
static_assert(TOTAL_LENGTH % USE_CORE_NUM == 0, "TOTAL_LENGTH must split evenly over USE_CORE_NUM cores");
static_assert(BLOCK_LENGTH % (TILE_NUM * BUFFER_NUM) == 0, "a core's slice must split into TILE_NUM x BUFFER_NUM tiles");
static_assert(TILE_LENGTH * 2 % 32 == 0, "a tile must be whole 32-byte blocks (16 fp16 elements)");

#ifndef ADD_SIZES_ONLY
#include "kernel_operator.h"  // CANN's AscendC API on an NPU; the CPU stand-in's on the portable backend

// --- 2. The kernel: Init, then CopyIn -> Compute -> CopyOut for every tile -----------------------
class KernelAdd {
public:
    __aicore__ inline KernelAdd() {}

    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR z)
    {
        // Each core sees only its own 1024-element slice of the global tensors.
        xGm.SetGlobalBuffer((__gm__ half *)x + BLOCK_LENGTH * AscendC::GetBlockIdx(), BLOCK_LENGTH);
        yGm.SetGlobalBuffer((__gm__ half *)y + BLOCK_LENGTH * AscendC::GetBlockIdx(), BLOCK_LENGTH);
        zGm.SetGlobalBuffer((__gm__ half *)z + BLOCK_LENGTH * AscendC::GetBlockIdx(), BLOCK_LENGTH);
        // BUFFER_NUM buffers of one tile each, carved out of the core's UB.
        pipe.InitBuffer(inQueueX, BUFFER_NUM, TILE_LENGTH * sizeof(half));
        pipe.InitBuffer(inQueueY, BUFFER_NUM, TILE_LENGTH * sizeof(half));
        pipe.InitBuffer(outQueueZ, BUFFER_NUM, TILE_LENGTH * sizeof(half));
    }

    __aicore__ inline void Process()
    {
        constexpr int32_t loopCount = TILE_NUM * BUFFER_NUM;
        // msprof op --aic-metrics=KernelScale collects its PMU counters only inside this region: the
        // tile loop, not Init. MetricsProfStart/Stop exist on Atlas A2/A3 only (AscendC API reference),
        // so CMakeLists.txt defines LAB_METRICS_PROF_REGION for those SoCs and for the portable build;
        // on any other SoC the kernel is built without the region.
#ifdef LAB_METRICS_PROF_REGION
        AscendC::MetricsProfStart();
#endif
        for (int32_t i = 0; i < loopCount; i++) {
            CopyIn(i);
            Compute(i);
            CopyOut(i);
        }
#ifdef LAB_METRICS_PROF_REGION
        AscendC::MetricsProfStop();
#endif
    }

private:
    // MTE2: take a free buffer of each input queue, fill it from GM, hand it on (EnQue).
    __aicore__ inline void CopyIn(int32_t progress)
    {
        AscendC::LocalTensor<half> xLocal = inQueueX.AllocTensor<half>();
        AscendC::LocalTensor<half> yLocal = inQueueY.AllocTensor<half>();
        AscendC::DataCopy(xLocal, xGm[progress * TILE_LENGTH], TILE_LENGTH);
        AscendC::DataCopy(yLocal, yGm[progress * TILE_LENGTH], TILE_LENGTH);
        inQueueX.EnQue(xLocal);
        inQueueY.EnQue(yLocal);
    }

    // V: wait for both inputs (DeQue), add, hand the sum on, give the input buffers back.
    // Change this function to try your own vector computation.  <- your kernel here
    __aicore__ inline void Compute(int32_t progress)
    {
        AscendC::LocalTensor<half> xLocal = inQueueX.DeQue<half>();
        AscendC::LocalTensor<half> yLocal = inQueueY.DeQue<half>();
        AscendC::LocalTensor<half> zLocal = outQueueZ.AllocTensor<half>();
        AscendC::Add(zLocal, xLocal, yLocal, TILE_LENGTH);
        outQueueZ.EnQue<half>(zLocal);
        inQueueX.FreeTensor(xLocal);
        inQueueY.FreeTensor(yLocal);
    }

    // MTE3: wait for the sum, store it to GM, free its buffer for the next tile.
    __aicore__ inline void CopyOut(int32_t progress)
    {
        AscendC::LocalTensor<half> zLocal = outQueueZ.DeQue<half>();
        AscendC::DataCopy(zGm[progress * TILE_LENGTH], zLocal, TILE_LENGTH);
        outQueueZ.FreeTensor(zLocal);
    }

    AscendC::TPipe pipe;
    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueX, inQueueY;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueueZ;
    AscendC::GlobalTensor<half> xGm;
    AscendC::GlobalTensor<half> yGm;
    AscendC::GlobalTensor<half> zGm;
};

// --- 3. The entry point the host launches on USE_CORE_NUM blocks ---------------------------------
extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z)
{
    KernelAdd op;
    op.Init(x, y, z);
    op.Process();
}
#endif  // ADD_SIZES_ONLY
