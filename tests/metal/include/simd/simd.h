// Stand-in for Apple's <simd/simd.h> (tests/metal/README.md): the generated kernels include
// it but use nothing from it; their vector types are the stand-in <metal_stdlib>'s.
#pragma once
