// Webhook delivery decisions (pb_webhook): what an HTTP response means for the job and for
// its endpoint, the endpoint's circuit breaker, and a receiver's timestamp check.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace postbox::webhook {

// A Retry-After above this is cut to it unless the caller names its own cap: 6 hours.
constexpr int64_t kDefaultMaxRetryAfterMs = 21600000;

// What a delivery attempt means for the endpoint's breaker.
enum class Signal { success, failure, neutral, gone };

struct Outcome {
  std::string_view type;            // ok, retry, fail
  std::optional<int64_t> status;    // the HTTP status, for the code http_<status>
  std::string_view code;            // when no status: network_error, request_timeout
  std::optional<int64_t> after;     // retry: the Retry-After delay, capped
  Signal signal = Signal::neutral;
};

// An HTTP status (100-599), or a transport error (`timeout` true for a request that ran out
// of time, false for any other network failure), with the Retry-After header's value.
Outcome classify_status(int64_t status, std::optional<std::string_view> retry_after, int64_t now, int64_t max_after_ms);
Outcome classify_error(bool timeout);

// Retry-After: delta-seconds or an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), as ms from
// `now` (a date in the past is 0). Anything else, or an absurd value, is nullopt (ignored).
std::optional<int64_t> parse_retry_after(std::string_view text, int64_t now);

enum class State { closed, open, half_open, disabled };

struct Endpoint {
  State state = State::closed;
  int64_t failures = 0;                   // consecutive failures
  std::optional<int64_t> opened_at;       // open: since when; half_open: when the probe began
  std::optional<int64_t> failing_since;   // the first of the consecutive failures
};

struct Gate {
  bool deliver = false;
  bool probe = false;                  // this delivery is the half-open probe
  bool disabled = false;
  std::optional<int64_t> retry_at;     // not delivering: when to look again
  std::optional<Endpoint> write;       // the state to store before delivering (probe taken)
};

// Before a delivery: may it go now?
Gate gate(const Endpoint& endpoint, int64_t now, int64_t cooldown_ms, int64_t probe_ms);

struct Record {
  Endpoint endpoint;
  bool changed = false;
  std::string_view event;   // "", webhook_endpoint_paused, webhook_endpoint_resumed, webhook_endpoint_disabled
  std::string_view reason;  // disabled: gone or failing
};

// After a delivery: the endpoint's next state. `disable_after_ms` (optional) disables an
// endpoint whose failures have lasted that long.
Record record(const Endpoint& endpoint, Signal signal, int64_t now, int64_t threshold,
              std::optional<int64_t> disable_after_ms);

std::string_view state_name(State state);
bool state_from_name(std::string_view name, State& state);
std::string_view signal_name(Signal signal);
bool signal_from_name(std::string_view name, Signal& signal);

}  // namespace postbox::webhook
