# clang 19 targeting wasm32-wasi with Debian's wasi-libc and libc++ (the wasi-sdk layout):
# the headers and libraries are found without --sysroot.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR wasm32)
set(CMAKE_C_COMPILER clang-19)
set(CMAKE_CXX_COMPILER clang++-19)
set(CMAKE_C_COMPILER_TARGET wasm32-wasi)
set(CMAKE_CXX_COMPILER_TARGET wasm32-wasi)
set(CMAKE_AR llvm-ar-19 CACHE FILEPATH "archiver")
set(CMAKE_RANLIB llvm-ranlib-19 CACHE FILEPATH "ranlib")
set(CMAKE_C_FLAGS_INIT "")
set(CMAKE_CXX_FLAGS_INIT "-fno-exceptions")
# -mexec-model=reactor is a link option; it is set on the postbox-core target.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_EXECUTABLE_SUFFIX ".wasm")
