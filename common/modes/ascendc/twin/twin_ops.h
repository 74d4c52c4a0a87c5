// Portable twin, part 3 of kernel_operator.h: DataCopy and the vector Add, bounds-checked, each
// timed into the pipe it runs on (MTE2 / MTE3 / vector).
#pragma once

#include "twin_tensors.h"

namespace AscendC {

namespace twin_detail {
template <typename T>
void CheckLocal(const LocalTensor<T>& t, uint32_t count, const char* op, const SrcLoc& where) {
    if (!t.twin_owner()) twin::Fatal(std::string(op) + " on a LocalTensor that no queue handed out", where);
    t.twin_owner()->RequireUsable(t.twin_buffer(), t.twin_generation(), op, where);
    if (count > t.GetSize())
        twin::Fatal(std::string(op) + " of " + std::to_string(count) + " elements into a tensor of " +
                        t.twin_owner()->Describe() + " that holds only " + std::to_string(t.GetSize()),
                    where);
}
template <typename T>
void CheckGlobal(const GlobalTensor<T>& g, uint32_t count, const char* op, const SrcLoc& where) {
    if (!g.twin_set()) twin::Fatal(std::string(op) + " on a GlobalTensor before SetGlobalBuffer()", where);
    if (count > g.GetSize())
        twin::Fatal(std::string(op) + " of " + std::to_string(count) + " elements runs past the end of " + g.Describe(),
                    where);
}
template <typename T>
void CheckBlocks(uint32_t count, const SrcLoc& where) {
    if ((static_cast<uint64_t>(count) * sizeof(T)) % DATA_BLOCK_BYTES != 0)
        twin::Fatal("DataCopy of " + std::to_string(count) + " x " + std::to_string(sizeof(T)) +
                        " B is not a whole number of 32-byte blocks",
                    where);
}
inline void AddTime(uint64_t ns, uint64_t twin::BlockTiming::*pipe) {
    if (::twin::g_block.timing) ::twin::g_block.timing->*pipe += ns;
}
}  // namespace twin_detail

// GM -> UB: the MTE2 pipe.
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count,
              const SrcLoc where = SrcLoc::current()) {
    twin_detail::CheckBlocks<T>(count, where);
    twin_detail::CheckLocal(dst, count, "DataCopy", where);
    twin_detail::CheckGlobal(src, count, "DataCopy", where);
    const uint64_t start = twin::NowNs();
    std::memcpy(dst.twin_data(), src.twin_data(), static_cast<size_t>(count) * sizeof(T));
    twin_detail::AddTime(twin::NowNs() - start, &twin::BlockTiming::mte2_ns);
}

// UB -> GM: the MTE3 pipe.
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count,
              const SrcLoc where = SrcLoc::current()) {
    twin_detail::CheckBlocks<T>(count, where);
    twin_detail::CheckLocal(src, count, "DataCopy", where);
    twin_detail::CheckGlobal(dst, count, "DataCopy", where);
    const uint64_t start = twin::NowNs();
    std::memcpy(dst.twin_data(), src.twin_data(), static_cast<size_t>(count) * sizeof(T));
    twin_detail::AddTime(twin::NowNs() - start, &twin::BlockTiming::mte3_ns);
}

// Element-wise add in UB: the vector (V) pipe. fp16 results round to fp16 like the NPU's.
template <typename T>
void Add(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count,
         const SrcLoc where = SrcLoc::current()) {
    if (count < 0) twin::Fatal("Add with a negative count", where);
    const auto n = static_cast<uint32_t>(count);
    twin_detail::CheckLocal(dst, n, "Add", where);
    twin_detail::CheckLocal(src0, n, "Add", where);
    twin_detail::CheckLocal(src1, n, "Add", where);
    const uint64_t start = twin::NowNs();
    T* out = dst.twin_data();
    const T* a = src0.twin_data();
    const T* b = src1.twin_data();
    for (uint32_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    twin_detail::AddTime(twin::NowNs() - start, &twin::BlockTiming::vec_ns);
}

}  // namespace AscendC
