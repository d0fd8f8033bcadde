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

struct Error {
  ErrorCode code = ErrorCode::invalid_input;
  std::string message;
};

// Stands in for "no value" in Result<Unit>.
struct Unit {};

// A value or an Error, like simdjson's result pairs; callers must look at it.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)), ok_(true) {}  // NOLINT: implicit by design
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  const Error& error() const { return error_; }
  Error take_error() { return std::move(error_); }

 private:
  T value_{};
  Error error_{};
  bool ok_;
};

using Status = Result<Unit>;

inline Status ok_status() { return Status(Unit{}); }

}  // namespace postbox
