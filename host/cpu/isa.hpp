// Which instruction set the CPU kernels of every filter kind run with.
#pragma once

#include "gbf/backend.hpp"

namespace gbf::detail::cpu {

/// The CPU kernels' instruction set, as picked for a filter.
enum class cpu_isa { scalar, avx2, avx512 };

/// The instruction set options::simd asks for on this CPU: automatic takes the
/// best the CPU has. Throws invalid_argument when the request names one the CPU
/// lacks. Kinds without AVX-512 kernels run their AVX2 ones for avx512.
cpu_isa pick_cpu_isa(cpu_simd requested);

}  // namespace gbf::detail::cpu
