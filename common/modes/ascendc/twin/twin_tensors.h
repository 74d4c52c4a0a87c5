// Portable twin, part 2 of kernel_operator.h: LocalTensor, TQue, TPipe and GlobalTensor with the
// pairing and capacity rules the hardware enforces (see kernel_operator.h for what the twin is).
#pragma once

#include "kernel_operator_base.h"

namespace AscendC {

class TQueBase;

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    uint32_t GetSize() const { return capacity_; }

    // Twin internals (the real LocalTensor has no such members; kernels must not use them).
    T* twin_data() const { return data_; }
    TQueBase* twin_owner() const { return owner_; }
    int twin_buffer() const { return buffer_; }
    uint32_t twin_generation() const { return generation_; }
    LocalTensor(T* data, uint32_t capacity, TQueBase* owner, int buffer, uint32_t generation)
        : data_(data), capacity_(capacity), owner_(owner), buffer_(buffer), generation_(generation) {}

private:
    T* data_ = nullptr;
    uint32_t capacity_ = 0;  // elements that fit in the queue's buffer
    TQueBase* owner_ = nullptr;
    int buffer_ = -1;
    uint32_t generation_ = 0;  // bumps on FreeTensor, so a stale copy of a freed tensor is caught
};

// Queue bookkeeping that does not depend on the position or depth.
class TQueBase {
public:
    enum class State { Free, Allocated, Enqueued, Dequeued };

    TQueBase(TPosition pos, int32_t depth) : pos_(pos), depth_(depth) {}
    TQueBase(const TQueBase&) = delete;
    TQueBase& operator=(const TQueBase&) = delete;
    ~TQueBase() {
        // A buffer still held at the end of the kernel means a missing FreeTensor: on the NPU the
        // next AllocTensor on this queue would wait forever.
        for (size_t i = 0; i < state_.size(); ++i)
            if (state_[i] != State::Free)
                twin::Fatal(Describe() + ": buffer " + std::to_string(i) + " was never freed (missing FreeTensor)", init_at_);
    }

    std::string Describe() const {
        const char* pos = pos_ == TPosition::VECIN ? "VECIN" : pos_ == TPosition::VECOUT ? "VECOUT" : "VECCALC";
        std::string name = initialised_ ? twin::NameAtCall(init_at_, "InitBuffer", true) : "";
        std::string text = std::string(pos) + " queue '" + (name.empty() ? "?" : name) + "' (TQue<" + pos + ", " +
                           std::to_string(depth_) + ">";
        if (initialised_)
            text += ", " + std::to_string(state_.size()) + " x " + std::to_string(buffer_bytes_) +
                    " B buffers from InitBuffer at " + twin::ShortLocation(init_at_);
        return text + ")";
    }

    void Init(uint8_t* base, int num, uint32_t bytes, const SrcLoc& where) {
        if (initialised_) twin::Fatal(Describe() + ": InitBuffer called twice for the same queue", where);
        init_at_ = where;
        initialised_ = true;
        base_ = base;
        buffer_bytes_ = bytes;
        state_.assign(static_cast<size_t>(num), State::Free);
        generation_.assign(static_cast<size_t>(num), 0);
    }

    int Alloc(const SrcLoc& where) {
        RequireInit("AllocTensor", where);
        for (size_t i = 0; i < state_.size(); ++i) {
            if (state_[i] == State::Free) {
                state_[i] = State::Allocated;
                return static_cast<int>(i);
            }
        }
        twin::Fatal("AllocTensor on " + Describe() + ": all " + std::to_string(state_.size()) +
                        " buffers are in use; FreeTensor one first (on the NPU this AllocTensor would block forever)",
                    where);
    }

    void Enqueue(TQueBase* owner, int buffer, uint32_t generation, const SrcLoc& where) {
        RequireHeld(owner, buffer, generation, "EnQue", where);
        if (state_[buffer] != State::Allocated)
            twin::Fatal("EnQue on " + Describe() + ": only a tensor fresh from AllocTensor can be enqueued", where);
        if (static_cast<int32_t>(fifo_.size()) >= depth_)
            twin::Fatal("EnQue on " + Describe() + ": queue already holds its depth of " + std::to_string(depth_) +
                            " tensors; DeQue before enqueuing more",
                        where);
        state_[buffer] = State::Enqueued;
        fifo_.push_back(buffer);
    }

    int Dequeue(const SrcLoc& where) {
        RequireInit("DeQue", where);
        if (fifo_.empty())
            twin::Fatal("DeQue on " + Describe() +
                            ": the queue is empty (nothing was EnQue'd; on the NPU this would wait forever)",
                        where);
        const int buffer = fifo_.front();
        fifo_.pop_front();
        state_[buffer] = State::Dequeued;
        return buffer;
    }

    void Free(TQueBase* owner, int buffer, uint32_t generation, const SrcLoc& where) {
        RequireHeld(owner, buffer, generation, "FreeTensor", where);
        if (state_[buffer] == State::Enqueued)
            twin::Fatal("FreeTensor on " + Describe() + ": the tensor is still enqueued; DeQue it first", where);
        state_[buffer] = State::Free;
        ++generation_[buffer];
    }

    // A tensor may be read or written only while its holder owns it (after AllocTensor or DeQue).
    void RequireUsable(int buffer, uint32_t generation, const char* op, const SrcLoc& where) const {
        RequireHeld(this, buffer, generation, op, where);
        if (state_[buffer] == State::Enqueued)
            twin::Fatal(std::string(op) + " on a tensor of " + Describe() +
                            " after EnQue: its consumer owns it now; DeQue it first",
                        where);
    }

    uint8_t* buffer_address(int buffer) const { return base_ + static_cast<size_t>(buffer) * buffer_bytes_; }
    uint32_t buffer_bytes() const { return buffer_bytes_; }
    uint32_t buffer_generation(int buffer) const { return generation_[static_cast<size_t>(buffer)]; }

private:
    void RequireInit(const char* op, const SrcLoc& where) const {
        if (!initialised_) twin::Fatal(std::string(op) + " on " + Describe() + " before pipe.InitBuffer()", where);
    }
    void RequireHeld(const TQueBase* owner, int buffer, uint32_t generation, const char* op,
                     const SrcLoc& where) const {
        RequireInit(op, where);
        if (owner != this)
            twin::Fatal(std::string(op) + " on " + Describe() + " with a tensor that belongs to " +
                            (owner ? owner->Describe() : std::string("no queue (default-constructed LocalTensor)")),
                        where);
        if (buffer < 0 || static_cast<size_t>(buffer) >= state_.size() || state_[buffer] == State::Free ||
            generation_[buffer] != generation)
            twin::Fatal(std::string(op) + " on " + Describe() + " with a tensor that was already freed", where);
    }

    TPosition pos_;
    int32_t depth_;
    bool initialised_ = false;
    SrcLoc init_at_{};
    uint8_t* base_ = nullptr;
    uint32_t buffer_bytes_ = 0;
    std::vector<State> state_;
    std::vector<uint32_t> generation_;
    std::deque<int> fifo_;
};

template <TPosition pos, int32_t depth>
class TQue : public TQueBase {
public:
    static_assert(depth >= 1, "a TQue needs a depth of at least 1");
    TQue() : TQueBase(pos, depth) {}

    template <typename T>
    LocalTensor<T> AllocTensor(const SrcLoc where = SrcLoc::current()) {
        const int buffer = Alloc(where);
        return Make<T>(buffer);
    }
    template <typename T>
    bool EnQue(const LocalTensor<T>& tensor, const SrcLoc where = SrcLoc::current()) {
        Enqueue(tensor.twin_owner(), tensor.twin_buffer(), tensor.twin_generation(), where);
        return true;
    }
    template <typename T>
    LocalTensor<T> DeQue(const SrcLoc where = SrcLoc::current()) {
        return Make<T>(Dequeue(where));
    }
    template <typename T>
    void FreeTensor(LocalTensor<T>& tensor, const SrcLoc where = SrcLoc::current()) {
        Free(tensor.twin_owner(), tensor.twin_buffer(), tensor.twin_generation(), where);
    }

private:
    template <typename T>
    LocalTensor<T> Make(int buffer) {
        return LocalTensor<T>(reinterpret_cast<T*>(buffer_address(buffer)), buffer_bytes() / sizeof(T), this, buffer,
                              buffer_generation(buffer));
    }
};

class TPipe {
public:
    TPipe() : ub_(new uint8_t[UB_BYTES]) {}

    template <TPosition pos, int32_t depth>
    void InitBuffer(TQue<pos, depth>& que, uint8_t num, uint32_t len, const SrcLoc where = SrcLoc::current()) {
        if (num < 1) twin::Fatal("InitBuffer: num must be at least 1", where);
        // Buffers start on 32-byte boundaries, so round each one up.
        const uint32_t bytes = (len + DATA_BLOCK_BYTES - 1) / DATA_BLOCK_BYTES * DATA_BLOCK_BYTES;
        const uint64_t need = static_cast<uint64_t>(num) * bytes;
        if (used_ + need > UB_BYTES)
            twin::Fatal("InitBuffer: " + std::to_string(num) + " x " + std::to_string(bytes) + " B does not fit in UB (" +
                            std::to_string(UB_BYTES - used_) + " B of " + std::to_string(UB_BYTES) + " B left)",
                        where);
        // Fresh UB holds garbage on the NPU too; 0xFF bytes read as fp16 NaN, so an element the
        // kernel forgets to compute can never pass verification by luck.
        std::memset(ub_.get() + used_, 0xFF, need);
        que.Init(ub_.get() + used_, num, bytes, where);
        used_ += need;
    }

private:
    std::unique_ptr<uint8_t[]> ub_;
    uint64_t used_ = 0;
};

template <typename T>
class GlobalTensor {
public:
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t size, const SrcLoc where = SrcLoc::current()) {
        data_ = buffer;
        size_ = size;
        set_at_ = where;
        set_ = true;
    }
    // A view starting `offset` elements in; it may not start past the end.
    GlobalTensor operator[](uint64_t offset) const {
        if (!set_) twin::Fatal("GlobalTensor indexed before SetGlobalBuffer()", SrcLoc::current());
        if (offset > size_) twin::Fatal(Describe() + ": offset " + std::to_string(offset) + " is past its end", set_at_);
        GlobalTensor view = *this;
        view.data_ += offset;
        view.size_ -= offset;
        return view;
    }
    uint64_t GetSize() const { return size_; }

    T* twin_data() const { return data_; }
    bool twin_set() const { return set_; }
    std::string Describe() const {
        std::string name = set_ ? twin::NameAtCall(set_at_, "SetGlobalBuffer", false) : "";
        return "GlobalTensor '" + (name.empty() ? std::string("?") : name) + "' (" + std::to_string(size_) +
               " elements left, SetGlobalBuffer at " + twin::ShortLocation(set_at_) + ")";
    }

private:
    T* data_ = nullptr;
    uint64_t size_ = 0;
    SrcLoc set_at_{};
    bool set_ = false;
};

}  // namespace AscendC
