# Finds the Emscripten toolchain file next to em++ (Debian: /usr/share/emscripten).
find_program(POSTBOX_EMXX em++ REQUIRED)
get_filename_component(POSTBOX_EMXX_REAL "${POSTBOX_EMXX}" REALPATH)
get_filename_component(POSTBOX_EMSCRIPTEN_ROOT "${POSTBOX_EMXX_REAL}" DIRECTORY)
include("${POSTBOX_EMSCRIPTEN_ROOT}/cmake/Modules/Platform/Emscripten.cmake")
