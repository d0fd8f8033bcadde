// The exports. Every entry copies the input into a padded buffer, checks the whole document is
// well-formed JSON, runs one family and keeps the result document until the next call.
// Nothing here traps: sizes are checked first and every failure becomes an error document.
#include "postbox/abi.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "postbox/families.h"
#include "postbox/json_error.h"
#include "postbox/json_input.h"
#include "postbox/numbers.h"

#if defined(__EMSCRIPTEN__)
#include <emscripten.h>
#define PB_EXPORT(name) extern "C" EMSCRIPTEN_KEEPALIVE
#elif defined(__wasm__)
#define PB_EXPORT(name) extern "C" __attribute__((export_name(#name)))
#else
#define PB_EXPORT(name) extern "C"
#endif

namespace postbox {
namespace {

// The families of family_list.h: an index, a name and a runner each.
#define POSTBOX_FAMILY_INDEX(name) k_##name,
enum Family { POSTBOX_FAMILIES(POSTBOX_FAMILY_INDEX) kFamilyCount };
#undef POSTBOX_FAMILY_INDEX

#define POSTBOX_FAMILY_NAME(name) #name,
constexpr const char* kFamilyNames[kFamilyCount] = {POSTBOX_FAMILIES(POSTBOX_FAMILY_NAME)};
#undef POSTBOX_FAMILY_NAME

using Runner = Status (*)(input::od::document&, JsonWriter&);
#define POSTBOX_FAMILY_RUNNER(name) run_##name,
constexpr Runner kRunners[kFamilyCount] = {POSTBOX_FAMILIES(POSTBOX_FAMILY_RUNNER)};
#undef POSTBOX_FAMILY_RUNNER

std::string g_result;
char* g_scratch = nullptr;
size_t g_scratch_capacity = 0;

// Every build parses with simdjson's portable kernel alone (CMakeLists.txt): on malformed input
// the SIMD kernels a native build would pick at run time name a different fault first, and with
// one kernel compiled in simdjson never reads SIMDJSON_FORCE_IMPLEMENTATION from the environment.
static_assert(SIMDJSON_IMPLEMENTATION_FALLBACK && !SIMDJSON_IMPLEMENTATION_ICELAKE && !SIMDJSON_IMPLEMENTATION_HASWELL &&
                  !SIMDJSON_IMPLEMENTATION_WESTMERE && !SIMDJSON_IMPLEMENTATION_ARM64 &&
                  !SIMDJSON_IMPLEMENTATION_PPC64 && !SIMDJSON_IMPLEMENTATION_LSX && !SIMDJSON_IMPLEMENTATION_LASX,
              "simdjson must be built with its fallback kernel only");

// One parser per family, reused across calls so its buffers are allocated once.
simdjson::ondemand::parser& parser_for(Family family) {
  static simdjson::ondemand::parser parsers[kFamilyCount];
  return parsers[family];
}

Error make_error(Family family, ErrorCode code, std::string what) {
  return Error{code, std::string(kFamilyNames[family]) + ": " + what};
}

// Copies the input into a buffer with SIMDJSON_PADDING zeroed bytes after it.
bool copy_padded(const char* ptr, size_t len) {
  const size_t need = len + simdjson::SIMDJSON_PADDING;
  if (need > g_scratch_capacity) {
    char* grown = static_cast<char*>(std::realloc(g_scratch, need));
    if (grown == nullptr) return false;
    g_scratch = grown;
    g_scratch_capacity = need;
  }
  if (len > 0) std::memcpy(g_scratch, ptr, len);
  std::memset(g_scratch + len, 0, simdjson::SIMDJSON_PADDING);
  return true;
}

Status decide(Family family, const char* ptr, int32_t len, JsonWriter& out) {
  if (len < 0 || (ptr == nullptr && len > 0)) {
    return make_error(family, ErrorCode::invalid_input, "input length must be between 0 and the buffer size");
  }
  if (len > kMaxInputBytes) {
    return make_error(family, ErrorCode::too_large,
                      "input is " + decimal_string(len) + " bytes; the limit is " + decimal_string(kMaxInputBytes));
  }
  const size_t size = static_cast<size_t>(len);
  if (!copy_padded(ptr, size)) return make_error(family, ErrorCode::too_large, "out of memory");
  input::od::document doc;
  const simdjson::error_code e =
      parser_for(family).iterate(g_scratch, size, size + simdjson::SIMDJSON_PADDING).get(doc);
  if (e) return json_error(kFamilyNames[family], e);
  Status valid = input::validate_document(doc, kFamilyNames[family]);
  if (!valid) return valid;
  return kRunners[family](doc, out);
}

// Buffers sized for an input above this are released after the call, so one large document
// does not pin its parser's memory for the life of the isolate.
constexpr int32_t kKeepBuffersBelowBytes = 256 * 1024;

void release_large_buffers(Family family) {
  parser_for(family) = simdjson::ondemand::parser{};
  std::free(g_scratch);
  g_scratch = nullptr;
  g_scratch_capacity = 0;
}

int32_t run(Family family, const char* ptr, int32_t len) {
  JsonWriter out;
  Status status = decide(family, ptr, len, out);
  if (len > kKeepBuffersBelowBytes) release_large_buffers(family);
  if (status) {
    g_result = out.take();
    return 0;
  }
  out.clear();
  write_error(out, status.error());
  g_result = out.take();
  return 1;
}

}  // namespace
}  // namespace postbox

using postbox::run;

#if defined(__wasi__) && defined(_LIBCPP_VERSION) && _LIBCPP_VERSION >= 150000
// libc++ reports broken invariants (it cannot throw here) through this hook, whose default
// prints with vfprintf and so drags stdio and three fd_* imports into the module. The core
// never reaches it on valid states; a trap is the honest answer if it ever did.
namespace std {
inline namespace __2 {
[[noreturn]] void __libcpp_verbose_abort(const char*, ...) { __builtin_trap(); }
}  // namespace __2
}  // namespace std
#endif

#if defined(__wasi__)
// simdjson's abstract classes put this in their vtables; libc++abi's version prints through
// stdio (fd_write, fd_seek, fd_close imports and ~10 KB). It can only run on a broken vtable.
extern "C" [[noreturn]] void __cxa_pure_virtual() { __builtin_trap(); }

// libc++abi's operator new consults the new-handler machinery, which links std::terminate and
// its stderr printing. Inputs are capped (kMaxInputBytes), so memory per call is bounded and
// plain malloc is enough; simdjson uses the nothrow forms and reports MEMALLOC itself.
void* operator new(size_t size) {
  void* p = std::malloc(size ? size : 1);
  if (p == nullptr) __builtin_trap();
  return p;
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept { return std::malloc(size ? size : 1); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return std::malloc(size ? size : 1); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif

PB_EXPORT(pb_abi_version) int32_t pb_abi_version() { return postbox::kAbiVersion; }

PB_EXPORT(pb_alloc) void* pb_alloc(int32_t len) {
  if (len < 0) return nullptr;
  const size_t size = static_cast<size_t>(len);
  void* buffer = std::malloc(size + simdjson::SIMDJSON_PADDING);
  // simdjson reads up to SIMDJSON_PADDING bytes past the end; those must be zero.
  if (buffer != nullptr) std::memset(static_cast<char*>(buffer) + size, 0, simdjson::SIMDJSON_PADDING);
  return buffer;
}

PB_EXPORT(pb_free) void pb_free(void* ptr) { std::free(ptr); }

PB_EXPORT(pb_result_ptr) const char* pb_result_ptr() { return postbox::g_result.data(); }

PB_EXPORT(pb_result_len) int32_t pb_result_len() { return static_cast<int32_t>(postbox::g_result.size()); }

// The numeric entries (numbers.cpp): defined here so the wasm link keeps them.
PB_EXPORT(pb_numbers_out) double* pb_numbers_out() { return postbox::numbers_out(); }

PB_EXPORT(pb_admit_numbers)
int32_t pb_admit_numbers(double now, double deadline_at, double lease_expires_at, double timeout_ms, double heartbeat_ms,
                         double attempts) {
  return postbox::admit_numbers(now, deadline_at, lease_expires_at, timeout_ms, heartbeat_ms, attempts);
}

PB_EXPORT(pb_pump_numbers)
int32_t pb_pump_numbers(double concurrency, double running, double buffered, double settles, double may_claim,
                        double remaining, double slowest_recent_ms, double oldest_settle_age_ms, double slack_ms,
                        double statement_ms, double max_batch, double max_jobs, double claimed) {
  return postbox::pump_numbers(concurrency, running, buffered, settles, may_claim, remaining, slowest_recent_ms,
                               oldest_settle_age_ms, slack_ms, statement_ms, max_batch, max_jobs, claimed);
}

PB_EXPORT(pb_settle_ok_numbers)
int32_t pb_settle_ok_numbers(double now, double attempts, double crashes, double streak, double max_attempts) {
  return postbox::settle_ok_numbers(now, attempts, crashes, streak, max_attempts);
}

#define POSTBOX_DEFINE_ENTRY(name) \
  PB_EXPORT(pb_##name) int32_t pb_##name(const char* ptr, int32_t len) { return run(postbox::k_##name, ptr, len); }
POSTBOX_FAMILIES(POSTBOX_DEFINE_ENTRY)
#undef POSTBOX_DEFINE_ENTRY
