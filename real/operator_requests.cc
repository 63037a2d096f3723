#include "real/operator_requests.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "real/wall_clock.h"


namespace onceflow::real {

namespace {

using json = nlohmann::json;
using State = OperatorRequest::State;

constexpr const char* kNextKey = "next";
constexpr const char* kRequestPrefix = "request/";
constexpr int kAttempts = 20;  // conflicting transactions retried (another ctl, another controller)

constexpr int64_t kKeptAnswered = 24 * 3600;  // seconds an answered request stays
// A request taken this long ago and not answered was left by a process that took it and
// ended (or lost the lead): the leader takes it again. Asking a controller takes seconds.
constexpr int64_t kAbandonedAfter = 30;

int64_t seconds_now() { return calendar_now() / kSeconds; }

std::string request_key(uint64_t id) { return fmt::format("{}{:020}", kRequestPrefix, id); }

std::string encode(const OperatorRequest& r) {
  return json{{"command", r.command}, {"state", request_state_name(r.state)}, {"by", r.by}, {"answer", r.answer},
              {"asked_at", r.asked_at}, {"taken_at", r.taken_at}}
      .dump();
}

std::optional<OperatorRequest> decode(uint64_t id, const std::string& bytes) {
  const json j = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("command") || !j["command"].is_string() || !j.contains("state")) return std::nullopt;
  OperatorRequest r;
  r.id = id;
  r.command = j["command"].get<std::string>();
  const std::string state = j["state"].is_string() ? j["state"].get<std::string>() : "";
  if (state == "pending") {
    r.state = State::kPending;
  } else if (state == "taken") {
    r.state = State::kTaken;
  } else if (state == "done") {
    r.state = State::kDone;
  } else if (state == "refused") {
    r.state = State::kRefused;
  } else {
    return std::nullopt;
  }
  r.by = j.value("by", "");
  r.answer = j.value("answer", "");
  r.asked_at = j.value("asked_at", int64_t{0});
  r.taken_at = j.value("taken_at", int64_t{0});
  return r;
}

// Runs `body` in a transaction and commits what it wrote, again when another transaction
// conflicted; `body` returns false to commit nothing. An ambiguous commit is resolved.
template <typename T>
Result<T> transact(RealStore& store, const std::function<Result<T>(Transaction&)>& body) {
  Status last = Status::unavailable("no attempt");
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto tx = store.begin();
    if (!tx) return tx.error();
    Result<T> out = body(*tx);
    if (!out || tx->write_count() == 0) {
      store.abort(*tx);
      return out;
    }
    auto committed = store.commit(*tx, {});
    if (committed) return out;
    last = committed.error();
    if (last.is_ambiguous()) {
      auto outcome = store.resolve(tx->id());
      if (!outcome) return outcome.error();
      if (*outcome == TxOutcome::kCommitted) return out;
      continue;
    }
    if (!last.is_conflict()) return last;
  }
  return last;
}

// Every request `tx` sees, oldest first (an operator's requests are few); rows that do not
// decode are passed over.
Result<std::vector<OperatorRequest>> all_requests(RealStore& store, const Transaction& tx) {
  auto rows = store.scan(tx, kOperatorRequests, kRequestPrefix, "request0", 100'000);
  if (!rows) return rows.error();
  std::vector<OperatorRequest> out;
  for (const Row& row : *rows) {
    const uint64_t id = std::strtoull(row.key.c_str() + std::string_view(kRequestPrefix).size(), nullptr, 10);
    if (auto r = decode(id, row.value)) out.push_back(std::move(*r));
  }
  return out;
}

// Reads request `id`, lets `change` alter it (false: leave it as it is), and stores it.
Status update_request(RealStore& store, uint64_t id, const std::function<bool(OperatorRequest&)>& change) {
  auto written = transact<bool>(store, [&](Transaction& tx) -> Result<bool> {
    auto row = store.get(tx, kOperatorRequests, request_key(id));
    if (!row) return row.error();
    auto r = *row ? decode(id, **row) : std::nullopt;
    if (!r || !change(*r)) return false;
    tx.put(kOperatorRequests, request_key(id), encode(*r));
    return true;
  });
  return written ? Status::ok() : written.error();
}

}  // namespace

const char* request_state_name(State s) {
  switch (s) {
    case State::kPending: return "pending";
    case State::kTaken: return "taken";
    case State::kDone: return "done";
    case State::kRefused: return "refused";
  }
  return "pending";
}

Result<std::vector<OperatorRequest>> recent_requests(RealStore& store, const Transaction& tx, size_t answered) {
  auto all = all_requests(store, tx);
  if (!all) return all.error();
  size_t answered_left = answered;
  std::vector<OperatorRequest> out;
  for (auto it = all->rbegin(); it != all->rend(); ++it) {
    const bool open = it->state == State::kPending || it->state == State::kTaken;
    if (open || answered_left > 0) {
      if (!open) --answered_left;
      out.push_back(*it);
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Result<uint64_t> submit_request(RealStore& store, const std::string& command) {
  const int64_t now = seconds_now();
  return transact<uint64_t>(store, [&](Transaction& tx) -> Result<uint64_t> {
    auto next = store.get(tx, kOperatorRequests, kNextKey);
    if (!next) return next.error();
    const uint64_t id = *next ? std::strtoull((*next)->c_str(), nullptr, 10) : 1;
    if (id == 0) return Status::invalid_argument("the store's operator request counter does not decode");
    OperatorRequest r;
    r.id = id;
    r.command = command;
    r.asked_at = now;
    tx.put(kOperatorRequests, kNextKey, std::to_string(id + 1));
    tx.put(kOperatorRequests, request_key(id), encode(r));
    return id;
  });
}

Result<std::optional<OperatorRequest>> read_request(RealStore& store, uint64_t id) {
  auto tx = store.begin();
  if (!tx) return tx.error();
  auto row = store.get(*tx, kOperatorRequests, request_key(id));
  store.abort(*tx);
  if (!row) return row.error();
  if (!*row) return std::optional<OperatorRequest>();
  auto r = decode(id, **row);
  if (!r) return Status::invalid_argument(fmt::format("operator request {} does not decode", id));
  return r;
}

Result<bool> withdraw_request(RealStore& store, uint64_t id) {
  return transact<bool>(store, [&](Transaction& tx) -> Result<bool> {
    auto row = store.get(tx, kOperatorRequests, request_key(id));
    if (!row) return row.error();
    const auto r = *row ? decode(id, **row) : std::nullopt;
    if (!r || r->state != State::kPending) return false;
    tx.erase(kOperatorRequests, request_key(id));
    return true;
  });
}

Result<std::optional<OperatorRequest>> take_next_request(RealStore& store, const std::string& by) {
  using Taken = std::optional<OperatorRequest>;
  const int64_t now = seconds_now();
  return transact<Taken>(store, [&](Transaction& tx) -> Result<Taken> {
    // An operator's requests are few: every one is read. Those answered stay a day for ctl
    // (and an operator) to read, then go with the next take.
    auto all = all_requests(store, tx);
    if (!all) return all.error();
    for (OperatorRequest& r : *all) {
      if ((r.state == State::kDone || r.state == State::kRefused) && now - r.asked_at > kKeptAnswered) {
        tx.erase(kOperatorRequests, request_key(r.id));
      }
      const bool abandoned = r.state == State::kTaken && now - r.taken_at > kAbandonedAfter;
      if (r.state != State::kPending && !abandoned) continue;
      r.state = State::kTaken;
      r.by = by;
      r.taken_at = now;
      tx.put(kOperatorRequests, request_key(r.id), encode(r));
      return Taken(std::move(r));
    }
    return Taken();
  });
}

// Whether stored request `r` is still as `taken` left it: taken by the same process, then.
bool still_taken(const OperatorRequest& r, const OperatorRequest& taken) {
  return r.state == State::kTaken && r.by == taken.by && r.taken_at == taken.taken_at;
}

Status release_request(RealStore& store, const OperatorRequest& taken) {
  return update_request(store, taken.id, [&](OperatorRequest& r) {
    if (!still_taken(r, taken)) return false;
    r.state = State::kPending;
    r.by.clear();
    r.taken_at = 0;
    return true;
  });
}

Status answer_request(RealStore& store, const OperatorRequest& taken, bool done, const std::string& answer) {
  return update_request(store, taken.id, [&](OperatorRequest& r) {
    if (!still_taken(r, taken)) return false;
    r.state = done ? State::kDone : State::kRefused;
    r.answer = answer;
    return true;
  });
}

}  // namespace onceflow::real
