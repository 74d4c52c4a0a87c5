// Portable twin of the AscendC API subset that add_kernel.cpp uses: the header the kernel includes.
//
// Same names and call shapes as CANN's kernel_operator.h, compiled by the host compiler, so the
// one kernel source builds both ways. The twin is strict where the hardware is unforgiving:
//   - a TQue holds at most `depth` enqueued tensors and hands out at most `num` buffers;
//   - AllocTensor / EnQue / DeQue / FreeTensor must pair up (a tensor is used only while held);
//   - DataCopy and Add never touch more elements than the buffer or the GM slice holds, and
//     DataCopy moves whole 32-byte blocks, as the MTE units do.
// Every violation stops the program with a message naming the queue or tensor and the line.
// This is not a simulator: timings are host-CPU timings, not NPU cycles.
#pragma once

#include "kernel_operator_base.h"  // qualifiers, UB size, block ids, MetricsProfStart/Stop
#include "twin_tensors.h"          // LocalTensor, TQue, TPipe, GlobalTensor
#include "twin_ops.h"              // DataCopy, Add
