/**
 * add_custom's sizes, set once. The kernel (add_kernel.cpp) splits the work with them and the host
 * program (main.cpp) allocates the buffers and launches USE_CORE_NUM blocks with them, so the two
 * cannot disagree. main.cpp prints them on its "kernel sizes:" line, which the Python side reads
 * instead of keeping its own copy.
 *
 * Plain constants and <cstdint> only: the same header compiles for the AI Core (ascendc_library),
 * for CANN's CPU debug build and for the portable twin.
 */
#ifndef ADD_SIZES_H
#define ADD_SIZES_H
#include <cstdint>

constexpr int32_t TOTAL_LENGTH = 8 * 1024;                             // elements in x, y and z
constexpr int32_t USE_CORE_NUM = 8;                                    // blockDim at launch
constexpr int32_t BLOCK_LENGTH = TOTAL_LENGTH / USE_CORE_NUM;          // elements per core: 1024
constexpr int32_t TILE_NUM = 8;                                        // tiles per core
constexpr int32_t BUFFER_NUM = 2;                                      // double buffer: 2 buffers per queue
constexpr int32_t TILE_LENGTH = BLOCK_LENGTH / TILE_NUM / BUFFER_NUM;  // elements per buffer: 64

// A change above must still split evenly: every core a whole number of whole tiles.
static_assert(TOTAL_LENGTH % USE_CORE_NUM == 0, "TOTAL_LENGTH must split evenly over USE_CORE_NUM cores");
static_assert(BLOCK_LENGTH % (TILE_NUM * BUFFER_NUM) == 0, "a core's slice must split into TILE_NUM x BUFFER_NUM tiles");

#endif  // ADD_SIZES_H
