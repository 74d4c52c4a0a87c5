// Portable twin: a real IEEE 754 binary16 type.
//
// The NPU's vector unit adds fp16 values and rounds every result to fp16. A twin that kept
// floats would hide exactly the effects a kernel author must see (overflow to inf at 65520,
// subnormals, ties-to-even), so `half` stores 16 bits and every operation rounds once.
//
// Why addition via double is exact: two halves have 11-bit significands and exponents in
// [-24, 15]; their exact sum needs at most 11 + 39 + 1 = 51 bits, and a double holds 53.
// One correctly rounded double -> half conversion therefore gives the IEEE result.
#pragma once

#include <cstdint>
#include <cstring>

namespace twin {

// binary16 bits -> double (always exact).
inline double HalfBitsToDouble(uint16_t h) {
    const int sign = (h >> 15) & 1;
    const int exp = (h >> 10) & 0x1F;
    const int mant = h & 0x3FF;
    double value;
    if (exp == 0) {
        value = static_cast<double>(mant) * (1.0 / 16777216.0);  // subnormal: mant * 2^-24
    } else if (exp == 31) {
        if (mant != 0) {
            uint64_t nan_bits = 0x7FF8000000000000ull;
            std::memcpy(&value, &nan_bits, sizeof value);
            return sign ? -value : value;
        }
        value = __builtin_inf();
    } else {
        // A normal half is a normal double with the exponent re-biased and the mantissa widened.
        const uint64_t bits = (static_cast<uint64_t>(exp - 15 + 1023) << 52) | (static_cast<uint64_t>(mant) << 42);
        std::memcpy(&value, &bits, sizeof value);
    }
    return sign ? -value : value;
}

// double -> binary16 bits, round to nearest, ties to even (IEEE default rounding).
inline uint16_t DoubleToHalfBits(double v) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    const uint16_t sign = static_cast<uint16_t>((b >> 48) & 0x8000);
    const int dexp = static_cast<int>((b >> 52) & 0x7FF);
    const uint64_t dmant = b & ((1ull << 52) - 1);
    if (dexp == 0x7FF) return sign | (dmant ? 0x7E00 : 0x7C00);  // NaN stays NaN (quiet), inf stays inf
    if (dexp == 0) return sign;  // zero or a double subnormal: far below half's smallest subnormal
    const int e = dexp - 1023;
    if (e > 15) return sign | 0x7C00;  // >= 65536: overflow to inf
    const uint64_t sig = dmant | (1ull << 52);
    // Keep 11 significant bits for a normal half; fewer for a subnormal (its unit is 2^-24).
    const int shift = e >= -14 ? 42 : 42 + (-14 - e);
    if (shift >= 64) return sign;  // below 2^-26: rounds to zero
    uint64_t q = sig >> shift;
    const uint64_t rem = sig & ((1ull << shift) - 1);
    const uint64_t halfway = 1ull << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) ++q;
    if (e < -14) return sign | static_cast<uint16_t>(q);  // q == 1024 is exactly the smallest normal
    int hexp = e + 15;
    if (q == 2048) { q = 1024; ++hexp; }  // rounding carried into the exponent
    if (hexp >= 31) return sign | 0x7C00;  // 65520 and up round to inf
    return sign | static_cast<uint16_t>(hexp << 10) | static_cast<uint16_t>(q & 0x3FF);
}

// The twin's `half`: 16 bits of storage; arithmetic rounds to fp16 after every operation.
struct half {
    uint16_t bits = 0;

    half() = default;
    half(double v) : bits(DoubleToHalfBits(v)) {}  // NOLINT: implicit, like the NPU's half
    static half FromBits(uint16_t b) { half h; h.bits = b; return h; }
    explicit operator double() const { return HalfBitsToDouble(bits); }
    explicit operator float() const { return static_cast<float>(HalfBitsToDouble(bits)); }
};

inline half operator+(half a, half b) { return half(HalfBitsToDouble(a.bits) + HalfBitsToDouble(b.bits)); }
inline half operator-(half a, half b) { return half(HalfBitsToDouble(a.bits) - HalfBitsToDouble(b.bits)); }
// The exact product of two halves needs 22 bits; a double holds it, so one rounding again suffices.
inline half operator*(half a, half b) { return half(HalfBitsToDouble(a.bits) * HalfBitsToDouble(b.bits)); }

static_assert(sizeof(half) == 2, "the twin's half must be 16 bits, like the NPU's");

}  // namespace twin
