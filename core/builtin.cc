#include "core/builtin.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cctype>

#include "core/env/codec.h"
#include "core/user_style.h"

namespace onceflow::builtin {

namespace {

int64_t parse_int(std::string_view text) {
  int64_t v = 0;
  bool negative = !text.empty() && text[0] == '-';
  for (char c : text.substr(negative ? 1 : 0)) v = v * 10 + (c - '0');
  return negative ? -v : v;
}

struct Request {
  uint64_t request_id = 0;
  uint64_t event_key = 0;
  std::string data;
};

Request decode_request(std::string_view bytes) {
  Decoder in(bytes);
  Request r;
  r.request_id = in.u64();
  r.event_key = in.u64();
  r.data = in.string();
  assert(in.done());
  return r;
}

// TStateKeeper: events become requests; responses add up into the external state.
class StateKeeper final : public ProcessFunction {
 public:
  void init(const InitContext& init) override {
    init.init_external_state_client(state_, kStateKeeperExternalState);
  }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    if (m.stream == "event") {
      const uint64_t request_id = context.random().next_u64();
      out.add_message(request_id, request_payload(request_id, m.key, m.payload));
      return;
    }
    assert(m.stream == "response");
    Decoder in(m.payload);
    (void)in.u64();
    const uint64_t event_key = in.u64();
    const int64_t length = in.i64();
    const int64_t total = parse_int(state_.get(event_key).value_or("0")) + length;
    state_.set(event_key, std::to_string(total));
    // The answer goes out too, in a form that does not depend on the order of the answers.
    out.add_message(event_key, fmt::format("key={} length={}", event_key, length), kStateKeeperResults);
  }

 private:
  ExternalStateClient state_;
};

// TRequestProcessor: keeps the request and FailedAttempts in its state, retries by timer.
class RequestProcessor final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(state_, "request_state"); }

  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    Encoder state;
    state.bytes(m.payload).i64(0);  // the request, FailedAttempts = 0
    try_request(m.key, state.take(), out, context);
  }

  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext& context) override {
    auto state = state_.get(t.key);
    if (!state) return;  // already answered
    try_request(t.key, *state, out, context);
  }

 private:
  static bool successful(uint64_t request_id, int64_t failed_attempts) {
    return (request_id + static_cast<uint64_t>(failed_attempts)) % kMaxRetries == 0;
  }

  void try_request(uint64_t key, const std::string& state, OutputCollector& out, RuntimeContext& context) {
    Decoder in(state);
    const std::string request_bytes = in.string();
    int64_t failed = in.i64();
    const Request request = decode_request(request_bytes);
    if (!successful(request.request_id, failed)) {
      ++failed;
      Encoder next;
      next.bytes(request_bytes).i64(failed);
      state_.set(key, next.take());
      out.add_timer(context.current_timestamp() + kRetryDelay);
      return;
    }
    state_.clear(key);
    out.add_message(request.event_key,
                    response_payload(request.request_id, request.event_key,
                                     static_cast<int64_t>(request.data.size())));
  }

  StateClient state_;
};

// Adds one to the counter of `key` in `counter` and returns the new count.
int64_t increment(StateClient& counter, uint64_t key) {
  const int64_t n = parse_int(counter.get(key).value_or("0")) + 1;
  counter.set(key, std::to_string(n));
  return n;
}

// Counts per key; emits every new count.
class Counter final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(count_, "count"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    out.add_message(m.key, fmt::format("key={} count={}", m.key, increment(count_, m.key)));
  }

 private:
  StateClient count_;
};

// Swift map: deterministic, stateless.
class Normalize final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    std::string word = m.payload;
    std::transform(word.begin(), word.end(), word.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    out.add_message(hash_bytes(word), word);
  }
};

class Annotate final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    // A batched input (relaxed swift batching) carries several words, one per line.
    size_t start = 0;
    while (start <= m.payload.size()) {
      const size_t end = std::min(m.payload.find('\n', start), m.payload.size());
      const std::string word = m.payload.substr(start, end - start);
      out.add_message(m.key, fmt::format("{}:{}", word, word.size()));
      start = end + 1;
    }
  }
};

class WordCount final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(count_, "count"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    out.add_message(m.key, fmt::format("{} n={}", m.payload, increment(count_, m.key)));
  }

 private:
  StateClient count_;
};

// Deadlines by event time: every event sets a timer at its own event time on the event-time
// stream `due`, due the moment the watermark reaches it, and a reminder for 2 s past it on the
// system-time stream `reminder`, twice (the two merge into one). Each firing says which it
// was. (`due` keeps equal timers apart: how many of one key's events with equal event times
// merge would otherwise depend on when the first one fired.)
class Deadline final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    out.add_timer(m.event_ts, m.event_ts, "due");
    out.add_timer(m.event_ts + 2 * kSeconds, m.event_ts, "reminder");
    out.add_timer(m.event_ts + 2 * kSeconds, m.event_ts, "reminder");
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    if (t.timer_stream == "due") {
      out.add_message(t.key, fmt::format("due key={} at={}", t.key, t.trigger_ts));
    } else {
      out.add_message(t.key, fmt::format("reminder key={} of={}", t.key, t.event_ts));
    }
  }
};

// A repeating timer: each event adds three ticks to its key's budget; a tick fires every
// 20 ms by system time, emits "tick key=K", and sets the next while the budget lasts. The
// next tick keeps the event time of the one before.
class Ticker final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(left_, "ticks_left"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    const int64_t left = parse_int(left_.get(m.key).value_or("0"));
    left_.set(m.key, std::to_string(left + 3));
    if (left == 0) out.add_timer(context.current_timestamp() + 20 * kMillis);
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    const int64_t left = parse_int(left_.get(t.key).value_or("0")) - 1;
    out.add_message(t.key, fmt::format("tick key={}", t.key));
    if (left <= 0) {
      left_.clear(t.key);
      return;
    }
    left_.set(t.key, std::to_string(left));
    out.add_timer(t.trigger_ts + 20 * kMillis, t.event_ts);
  }

 private:
  StateClient left_;
};

template <typename T>
ProcessFunctionFactory factory() {
  return [] { return std::make_unique<T>(); };
}

}  // namespace

std::string request_payload(uint64_t request_id, uint64_t event_key, const std::string& data) {
  Encoder out;
  out.u64(request_id).u64(event_key).bytes(data);
  return out.take();
}

std::string response_payload(uint64_t request_id, uint64_t event_key, int64_t length) {
  Encoder out;
  out.u64(request_id).u64(event_key).i64(length);
  return out.take();
}

void register_all(ComputationRegistry& registry) {
  // These two parse what they read: a spec must give them only those streams.
  registry.add("StateKeeper", factory<StateKeeper>(), FunctionContract{{"event", "response"}});
  registry.add("RequestProcessor", factory<RequestProcessor>(), FunctionContract{{"request"}});
  registry.add("Counter", factory<Counter>());
  registry.add("Normalize", factory<Normalize>());
  registry.add("Annotate", factory<Annotate>());
  registry.add("WordCount", factory<WordCount>());
  registry.add("Deadline", factory<Deadline>());
  registry.add("Ticker", factory<Ticker>());
  user_style::register_all(registry);
}

}  // namespace onceflow::builtin
