// Errors travel as values: the core is built without exceptions and must never trap.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace postbox {

enum class ErrorCode {
  invalid_json,
  invalid_input,
  invalid_policy,
  invalid_cron,
  invalid_message,
  unknown_op,
  too_large,
};

std::string_view error_code_name(ErrorCode code);

// A failure: its code and message, held on the heap so that an Error, and a Result with it,
// is one pointer. Moving one copies and clears that pointer, and the release of a moved-from
// Error compiles to nothing: the error paths, most of the core's code, stay small in the wasm.
class Error {
 public:
  Error(ErrorCode code, std::string message);
  Error(Error&& other) noexcept : detail_(std::exchange(other.detail_, nullptr)) {}
  Error& operator=(Error&& other) noexcept {
    std::swap(detail_, other.detail_);
    return *this;
  }
  Error(const Error&) = delete;
  Error& operator=(const Error&) = delete;
  ~Error() {
    if (detail_ != nullptr) release(detail_);
  }

  ErrorCode code() const { return detail_->code; }
  const std::string& message() const { return detail_->message; }

 private:
  template <class T>
  friend class Result;
  struct Detail {
    ErrorCode code;
    std::string message;
  };
  Error() = default;  // no failure: what a Result holding a value keeps
  static void release(Detail* detail);
  Detail* detail_ = nullptr;
};

// Stands in for "no value" in Result<Unit>.
struct Unit {};

// A value or an Error, like simdjson's result pairs; callers must look at it.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : error_(std::move(error)) {}  // NOLINT

  bool ok() const { return error_.detail_ == nullptr; }
  explicit operator bool() const { return ok(); }
  T& value() { return value_; }
  const T& value() const { return value_; }
  const Error& error() const { return error_; }
  Error take_error() { return std::move(error_); }

 private:
  T value_{};
  Error error_;
};

using Status = Result<Unit>;

inline Status ok_status() { return Status(Unit{}); }

}  // namespace postbox
