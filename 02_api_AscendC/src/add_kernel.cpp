/**
 * add_custom: z = x + y on fp16, the classic AscendC vector kernel, written to be profiled.
 *
 * The work: 8192 elements split over 8 AI Vector cores (blocks). Each core owns 1024 elements
 * and walks them in 8 tiles; every tile is split in two for double buffering, so the loop
 * runs 16 times over 64-element halves.
 * The sizes live in add_sizes.h, shared with the host program (main.cpp).
 *
 * Each step is a three-stage pipeline joined by queues in the Unified Buffer (UB):
 *   CopyIn   GM -> UB  (DataCopy, runs on the MTE2 pipe)
 *   Compute  UB -> UB  (Add, runs on the vector pipe, V)
 *   CopyOut  UB -> GM  (DataCopy, runs on the MTE3 pipe)
 * With two buffers per queue, MTE2 can fetch tile i+1 while V adds tile i and MTE3 stores
 * tile i-1. The queues (TQue) carry the synchronisation: DeQue waits for the producer's EnQue.
 *
 * msprof's PipeUtilization metrics tell you which of those pipes (or the scalar unit that
 * issues every instruction and runs the loop) this kernel is bound by.
 *
 * This file is the only kernel source. On an NPU it is compiled by CANN's ascendc_library;
 * on any other machine the same file is compiled against the portable twin in src/twin/.
 */
#include "kernel_operator.h"

#include "add_sizes.h"  // TOTAL_LENGTH, USE_CORE_NUM, BLOCK_LENGTH, TILE_NUM, BUFFER_NUM, TILE_LENGTH

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
        // so CMakeLists.txt defines LAB_METRICS_PROF_REGION for those SoCs and for the twin; on any
        // other SoC the kernel is built without the region.
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
    __aicore__ inline void CopyIn(int32_t progress)
    {
        AscendC::LocalTensor<half> xLocal = inQueueX.AllocTensor<half>();
        AscendC::LocalTensor<half> yLocal = inQueueY.AllocTensor<half>();
        AscendC::DataCopy(xLocal, xGm[progress * TILE_LENGTH], TILE_LENGTH);
        AscendC::DataCopy(yLocal, yGm[progress * TILE_LENGTH], TILE_LENGTH);
        inQueueX.EnQue(xLocal);
        inQueueY.EnQue(yLocal);
    }

    // Change this function to try your own vector computation (see README).
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

extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z)
{
    KernelAdd op;
    op.Init(x, y, z);
    op.Process();
}
