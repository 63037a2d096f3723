#include "core/user_style.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <string_view>
#include <vector>

#include "core/env/random.h"

namespace onceflow::user_style {

namespace {

int64_t number(const std::optional<std::string>& text) {
  int64_t v = 0;
  if (text) std::from_chars(text->data(), text->data() + text->size(), v);
  return v;
}

// The key's count in `counter`, one more than before.
int64_t count_up(StateClient& counter, uint64_t key) {
  const int64_t n = number(counter.get(key)) + 1;
  counter.set(key, std::to_string(n));
  return n;
}

class LongestSoFar final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(longest_, "longest"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    if (m.payload.size() <= longest_.get(m.key).value_or("").size()) return;
    longest_.set(m.key, m.payload);
    out.add_message(m.key, "longest so far: " + m.payload);
  }

 private:
  StateClient longest_;
};

// The maximum so far and whether a report is armed, in state; the report when the timer fires.
class RunningMax final : public ProcessFunction {
 public:
  void init(const InitContext& init) override {
    init.init_state_client(max_, "max");
    init.init_state_client(armed_, "armed");
  }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    const int64_t seen = number(max_.get(m.key));
    if (!max_.get(m.key) || value_of(m) > seen) max_.set(m.key, std::to_string(std::max(seen, value_of(m))));
    if (armed_.get(m.key)) return;
    armed_.set(m.key, "1");
    out.add_timer(context.current_timestamp() + kReportDelay);
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    armed_.clear(t.key);
    out.add_message(t.key, fmt::format("key={} max={}", t.key, number(max_.get(t.key))));
  }

 private:
  StateClient max_;
  StateClient armed_;
};

// A session: "start end count" in event time; its gap timer fires at end + gap.
class SessionWindow final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(session_, "session"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    Micros start = m.event_ts, end = m.event_ts;
    int64_t count = 0;
    if (const auto s = session_.get(m.key)) std::sscanf(s->c_str(), "%ld %ld %ld", &start, &end, &count);
    if (count > 0 && m.event_ts > end + kSessionGap) {
      // The session's gap passed before this word, whether or not its timer fired yet (the
      // engine may hand over a message before a timer that was due): it is over.
      out.add_message(m.key, fmt::format("key={} session {}..{}us words={}", m.key, start, end, count));
      start = end = m.event_ts;
      count = 0;
    }
    start = std::min(start, m.event_ts);
    end = std::max(end, m.event_ts);
    session_.set(m.key, fmt::format("{} {} {}", start, end, count + 1));
    out.add_timer(end + kSessionGap, end);
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    const auto s = session_.get(t.key);
    if (!s) return;  // closed by an earlier timer
    Micros start = 0, end = 0;
    int64_t count = 0;
    std::sscanf(s->c_str(), "%ld %ld %ld", &start, &end, &count);
    if (end + kSessionGap > t.trigger_ts) return;  // extended since: a later timer closes it
    session_.clear(t.key);
    out.add_message(t.key, fmt::format("key={} session {}..{}us words={}", t.key, start, end, count));
  }

 private:
  StateClient session_;
};

class Lottery final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(count_, "count"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    const int64_t n = count_up(count_, m.key);
    out.add_message(m.key, fmt::format("key={} n={} draw={} at={}", m.key, n, context.random().uniform(1'000'000),
                                       context.current_timestamp()));
  }

 private:
  StateClient count_;
};


// Escalation: per key, words gathered into a batch that a processing-time timer at a random
// delay reports, on the key of the batch's size; the report sometimes arms the next timer
// itself. Every third word also raises an alert on another key at once.
class Escalation final : public ProcessFunction {
 public:
  void init(const InitContext& init) override {
    init.init_state_client(pending_, "pending");
    init.init_state_client(seen_, "seen");
  }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    const int64_t n = count_up(seen_, m.key);
    const std::string before = pending_.get(m.key).value_or("");
    pending_.set(m.key, before + m.payload.substr(0, 3) + ";");
    if (before.empty()) out.add_timer(context.current_timestamp() + 5000 + context.random().uniform_range(0, 35000));
    if (n % 3 == 0) {
      out.add_message((m.key * 7 + static_cast<uint64_t>(n)) % 5,
                      fmt::format("alert from={} n={} roll={}", m.key, n, context.random().uniform(100)), "alerts");
    }
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext& context) override {
    const std::string batch = pending_.get(t.key).value_or("");
    pending_.clear(t.key);
    const auto words = static_cast<uint64_t>(std::count(batch.begin(), batch.end(), ';'));
    out.add_message(words % 4, fmt::format("batch of {} words={} at={}", t.key, batch, context.current_timestamp()),
                    "alerts");
    if (words > 0 && context.random().uniform(3) == 0) out.add_timer(context.current_timestamp() + 20000);
  }

 private:
  StateClient pending_;
  StateClient seen_;
};

// AlertTotals: per key, the alerts and the characters taken so far, reported with each alert.
class AlertTotals final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(total_, "total"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    int64_t alerts = 0, chars = 0;
    if (const auto s = total_.get(m.key)) std::sscanf(s->c_str(), "%ld %ld", &alerts, &chars);
    ++alerts;
    chars += static_cast<int64_t>(m.payload.size());
    total_.set(m.key, fmt::format("{} {}", alerts, chars));
    out.add_message(m.key, fmt::format("key={} alerts={} chars={} last={}", m.key, alerts, chars, m.payload));
  }

 private:
  StateClient total_;
};

// FanOut: a tokenizer's fan-out. Each word goes out in one to three pieces, as many as the
// key's count so far says (so the arrival order decides), each on a key of its own; every
// fifth word of a key arms a processing-time timer whose firing sends the key's count to two
// keys. One input, or one firing, gives several outputs: each must be a message of its own.
class FanOut final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(count_, "count"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    const int64_t n = count_up(count_, m.key);
    const int64_t pieces = 1 + n % 3;
    for (int64_t i = 0; i < pieces; ++i) {
      const size_t from = std::min(m.payload.size(), static_cast<size_t>(i) * 2);
      out.add_message((m.key + static_cast<uint64_t>(i) * 5) % kFanOutKeys,
                      fmt::format("piece {} of {} from={} n={} text={}", i + 1, pieces, m.key, n, m.payload.substr(from)));
    }
    if (n % 5 == 0) out.add_timer(context.current_timestamp() + kReportDelay / 5);
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    const int64_t n = number(count_.get(t.key));
    out.add_message(t.key % kFanOutKeys, fmt::format("tick of {} n={}", t.key, n));
    out.add_message((t.key + 1) % kFanOutKeys, fmt::format("tock of {} n={}", t.key, n));
  }

 private:
  static constexpr uint64_t kFanOutKeys = 11;
  StateClient count_;
};

// A join side's waiting entries, oldest first, as state holds them: "<event time> <length>
// <payload>" one after another (a length, so that a payload may hold any byte).
struct Waiting {
  Micros event_ts = 0;
  std::string payload;
};
std::vector<Waiting> waiting_in(const std::optional<std::string>& text) {
  std::vector<Waiting> out;
  const std::string stored = text.value_or("");
  std::string_view rest = stored;
  while (!rest.empty()) {
    Waiting w;
    size_t length = 0;
    const auto ts = std::from_chars(rest.data(), rest.data() + rest.size(), w.event_ts);
    if (ts.ec != std::errc() || ts.ptr == rest.data() + rest.size()) break;
    rest.remove_prefix(static_cast<size_t>(ts.ptr - rest.data()) + 1);
    const auto len = std::from_chars(rest.data(), rest.data() + rest.size(), length);
    if (len.ec != std::errc() || len.ptr == rest.data() + rest.size()) break;
    rest.remove_prefix(static_cast<size_t>(len.ptr - rest.data()) + 1);
    if (length > rest.size()) break;
    w.payload = std::string(rest.substr(0, length));
    rest.remove_prefix(length);
    out.push_back(std::move(w));
  }
  return out;
}
void keep_waiting(StateClient& side, uint64_t key, const std::vector<Waiting>& entries) {
  if (entries.empty()) return side.clear(key);
  std::string text;
  for (const Waiting& w : entries) fmt::format_to(std::back_inserter(text), "{} {} {}", w.event_ts, w.payload.size(), w.payload);
  side.set(key, std::move(text));
}

// OrderPaymentJoin: orders and payments of a key, from two sources, matched first come first
// served, whatever their event times. An order still unmatched when its timer fires, once the
// job's event-time watermark (which follows both inputs) is kJoinWindow past it, expires; a
// payment that finds no order waits for one, for as long as it takes. Whether an order is
// matched or expires, and with which payment, depends on the order the two streams' messages
// arrive in and on when the watermark moves: the engine's choices.
class OrderPaymentJoin final : public ProcessFunction {
 public:
  void init(const InitContext& init) override {
    init.init_state_client(orders_, "orders");
    init.init_state_client(payments_, "payments");
    init.init_state_client(tally_, "tally");
  }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    const bool order = m.stream == "order";
    StateClient& mine = order ? orders_ : payments_;
    StateClient& other = order ? payments_ : orders_;
    std::vector<Waiting> waiting = waiting_in(other.get(m.key));
    const Waiting arrived{m.event_ts, m.payload};
    if (waiting.empty()) {
      std::vector<Waiting> own = waiting_in(mine.get(m.key));
      own.push_back(arrived);
      keep_waiting(mine, m.key, own);
      if (order) out.add_timer(m.event_ts + kJoinWindow);
      return;
    }
    const Waiting first = waiting.front();
    waiting.erase(waiting.begin());
    keep_waiting(other, m.key, waiting);
    const Waiting& o = order ? arrived : first;
    const Waiting& p = order ? first : arrived;
    count(m.key, 1, 0);
    out.add_message(m.key, fmt::format("key={} matched order=[{} {}] payment=[{} {}]", m.key, o.event_ts, o.payload,
                                       p.event_ts, p.payload));
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    // Every waiting order at least kJoinWindow older than the timer expires; later ones wait.
    std::vector<Waiting> kept;
    int64_t expired = 0;
    for (Waiting& w : waiting_in(orders_.get(t.key))) {
      if (w.event_ts + kJoinWindow > t.trigger_ts) {
        kept.push_back(std::move(w));
        continue;
      }
      ++expired;
      out.add_message(t.key, fmt::format("key={} expired order=[{} {}] due at {}", t.key, w.event_ts, w.payload, t.trigger_ts));
    }
    if (expired == 0) return;
    keep_waiting(orders_, t.key, kept);
    count(t.key, 0, expired);
  }

 private:
  // The key's tally, "<matched> <expired>".
  void count(uint64_t key, int64_t matched, int64_t expired) {
    const std::string text = tally_.get(key).value_or("0 0");
    int64_t m = 0, e = 0;
    const auto first = std::from_chars(text.data(), text.data() + text.size(), m);
    if (first.ptr != text.data() + text.size()) std::from_chars(first.ptr + 1, text.data() + text.size(), e);
    tally_.set(key, fmt::format("{} {}", m + matched, e + expired));
  }
  StateClient orders_;
  StateClient payments_;
  StateClient tally_;
};

template <typename T>
ProcessFunctionFactory factory() {
  return [] { return std::make_unique<T>(); };
}

}  // namespace

int64_t value_of(const Message& m) { return static_cast<int64_t>(hash_bytes(m.payload) % 1000); }

void register_all(ComputationRegistry& registry) {
  registry.add("LongestSoFar", factory<LongestSoFar>());
  registry.add("RunningMax", factory<RunningMax>());
  registry.add("SessionWindow", factory<SessionWindow>());
  registry.add("Lottery", factory<Lottery>());
  registry.add("Escalation", factory<Escalation>());
  registry.add("AlertTotals", factory<AlertTotals>());
  registry.add("OrderPaymentJoin", factory<OrderPaymentJoin>());
  registry.add("FanOut", factory<FanOut>());
}

}  // namespace onceflow::user_style
