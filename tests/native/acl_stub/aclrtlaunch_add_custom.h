// TEST MATERIAL: what CANN's ascendc_library generates for add_custom (aclrtlaunch_add_custom.h).
#pragma once
#include <cstdint>

#include "acl/acl.h"

#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func
#endif

extern "C" uint32_t aclrtlaunch_add_custom(uint32_t blockDim, aclrtStream stream, void* x, void* y, void* z);
