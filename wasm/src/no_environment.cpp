// The core reads no environment: every input arrives in the call's JSON. simdjson's run-time
// kernel choice asks getenv("SIMDJSON_FORCE_IMPLEMENTATION"); only one kernel is compiled in,
// but an optimiser that keeps that call (Emscripten with LTO does) would make the module import
// WASI's environ_get. In the wasm builds getenv answers "unset", so no such import exists.
#if defined(__wasm__)
extern "C" char* getenv(const char*) { return nullptr; }
#endif
