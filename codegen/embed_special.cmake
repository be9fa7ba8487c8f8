# Turns runtime/special_math.inc into a C++ raw string for the CUDA prelude
# (codegen/cuda_prelude.h): the GPU compiles the CPU's own digamma and zeta.
file(READ ${IN} content)
file(WRITE ${OUT} "// Generated from runtime/special_math.inc by codegen/embed_special.cmake.\n#pragma once\ninline constexpr const char* kTracerSpecialMathSource = R\"TRSF(${content})TRSF\";\n")
