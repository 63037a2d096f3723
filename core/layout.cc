#include "core/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <functional>
#include <map>

#include "core/engine.h"
#include "core/env/codec.h"
#include "core/message.h"
#include "core/stream_rows.h"

namespace onceflow {

std::string encode_layout(const Layout& layout) {
  Encoder out;
  out.u64(layout.version).u64(layout.partitions.size());
  for (const auto& [name, count] : layout.partitions) out.bytes(name).u64(static_cast<uint64_t>(count));
  out.bytes(layout.spec_yaml).u64(layout.source_generations.size());
  for (const auto& [name, generation] : layout.source_generations) out.bytes(name).u64(generation);
  out.i64(layout.epoch_period_us).u64(static_cast<uint64_t>(layout.epoch_batch_limit));
  out.u64(layout.target_tablets.size());
  for (const auto& [name, tablets] : layout.target_tablets) out.bytes(name).u64(static_cast<uint64_t>(tablets));
  out.u64(layout.producer_generations.size());
  for (const auto& [name, generation] : layout.producer_generations) out.bytes(name).u64(generation);
  if (layout.max_batch_messages != 0) out.u64(static_cast<uint64_t>(layout.max_batch_messages));
  return out.take();
}

std::optional<Layout> decode_layout(std::string_view bytes) {
  Decoder in(bytes);
  Layout layout;
  layout.version = in.u64();
  const uint64_t n = in.u64();
  for (uint64_t i = 0; in.ok() && i < n; ++i) {
    std::string name = in.string();
    layout.partitions[std::move(name)] = static_cast<int>(in.u64());
  }
  if (in.done()) return layout;  // a row written before specs were stored ends here
  layout.spec_yaml = in.string();
  const uint64_t sources = in.u64();
  for (uint64_t i = 0; in.ok() && i < sources; ++i) {
    std::string name = in.string();
    layout.source_generations[std::move(name)] = static_cast<uint32_t>(in.u64());
  }
  if (in.done()) return layout;  // a row written before settings were changed live ends here
  layout.epoch_period_us = in.i64();
  layout.epoch_batch_limit = static_cast<int>(in.u64());
  if (in.done()) return layout;  // a row written before sink targets were followed ends here
  const uint64_t targets = in.u64();
  for (uint64_t i = 0; in.ok() && i < targets; ++i) {
    std::string name = in.string();
    layout.target_tablets[std::move(name)] = static_cast<int>(in.u64());
  }
  const uint64_t generations = in.u64();
  for (uint64_t i = 0; in.ok() && i < generations; ++i) {
    std::string name = in.string();
    layout.producer_generations[std::move(name)] = static_cast<uint32_t>(in.u64());
  }
  if (in.done()) return layout;  // a row written before sink batch limits changed live ends here
  layout.max_batch_messages = static_cast<int>(in.u64());
  if (!in.done()) return std::nullopt;
  return layout;
}

std::string encode_pending_layout(const PendingLayout& pending) {
  Encoder out;
  out.u64(pending.resume ? 1 : 0).bytes(encode_layout(pending.layout));
  return out.take();
}

std::optional<PendingLayout> decode_pending_layout(std::string_view bytes) {
  Decoder in(bytes);
  PendingLayout pending;
  pending.resume = in.u64() != 0;
  auto layout = decode_layout(in.string());
  if (!layout || !in.done()) return std::nullopt;
  pending.layout = std::move(*layout);
  return pending;
}

std::optional<Layout> layout_to_change(const std::optional<std::string>& layout_row,
                                       const std::optional<std::string>& pending_row) {
  if (pending_row) return decode_pending_layout(*pending_row).value().layout;
  if (layout_row) return decode_layout(*layout_row).value();
  return std::nullopt;
}

PipelineSpec with_layout(const PipelineSpec& spec, const Layout& layout) {
  PipelineSpec out = spec;
  if (!layout.spec_yaml.empty()) {
    auto stored = parse_pipeline_spec_text(layout.spec_yaml, "the stored spec");
    assert(stored.has_value());  // checked before it was stored
    out = std::move(*stored);
  }
  for (auto& s : out.sources) {
    if (auto it = layout.source_generations.find(s.name); it != layout.source_generations.end()) s.generation = it->second;
  }
  if (layout.epoch_period_us != 0) out.epoch_period_us = layout.epoch_period_us;
  if (layout.epoch_batch_limit != 0) out.epoch_batch_limit = layout.epoch_batch_limit;
  if (layout.max_batch_messages != 0) {
    for (auto& s : out.sinks) s.max_batch_messages = layout.max_batch_messages;
  }
  out.layout_version = layout.version;
  for (auto& c : out.computations) {
    if (auto it = layout.partitions.find(c.name); it != layout.partitions.end()) c.partitions = it->second;
  }
  for (auto& s : out.sinks) {
    if (auto it = layout.partitions.find(s.name); it != layout.partitions.end()) s.partitions = it->second;
    if (auto it = layout.target_tablets.find(s.name); it != layout.target_tablets.end()) s.target_tablets = it->second;
    if (auto it = layout.producer_generations.find(s.name); it != layout.producer_generations.end()) {
      s.producer_generation = it->second;
    }
  }
  return out;
}

namespace {

// "NAME=VALUE ..." split at spaces into (NAME, VALUE) pairs; `form` names the expected form.
Result<std::vector<std::pair<std::string_view, std::string_view>>> name_value_items(std::string_view text,
                                                                                    std::string_view form) {
  std::vector<std::pair<std::string_view, std::string_view>> out;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view item = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq + 1 == item.size()) {
      return Status::invalid_argument(fmt::format("expected {}, got '{}'", form, item.substr(0, 40)));
    }
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  if (out.empty()) return Status::invalid_argument(fmt::format("expected at least one {}", form));
  return out;
}

}  // namespace

Result<Layout> reconfigured_layout(const Layout& layout, std::string_view text) {
  auto items = name_value_items(text, "SETTING=VALUE");
  if (!items) return items.error();
  Layout next = layout;
  next.version = layout.version + 1;
  for (const auto& [name, value] : *items) {
    if (name == "epoch_period") {
      const auto period = parse_duration(value);
      if (!period || *period < 1 * kMillis || *period > 60 * kSeconds) {
        return Status::invalid_argument(fmt::format("epoch_period: '{}'; expected a duration from 1ms to 60s",
                                                    value.substr(0, 40)));
      }
      next.epoch_period_us = *period;
    } else if (name == "epoch_batch_limit" || name == "max_batch_messages") {
      int limit = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (ec != std::errc() || ptr != value.data() + value.size() || limit < 1 || limit > 1'000'000) {
        return Status::invalid_argument(fmt::format("{}: '{}'; expected 1 to 1000000", name, value.substr(0, 40)));
      }
      (name == "epoch_batch_limit" ? next.epoch_batch_limit : next.max_batch_messages) = limit;
    } else {
      return Status::invalid_argument(fmt::format(
          "no setting '{}' changes live (epoch_period, epoch_batch_limit, max_batch_messages)", name.substr(0, 40)));
    }
  }
  return next;
}

Result<Layout> respecified_layout(const PipelineSpec& current, const Layout& layout, std::string yaml) {
  auto next_spec = parse_pipeline_spec_text(yaml, "the new spec");
  if (!next_spec) return next_spec.error();
  Layout next;
  next.version = layout.version + 1;
  next.spec_yaml = std::move(yaml);
  next.source_generations = layout.source_generations;
  struct Count {
    const char* kind;
    const std::string* name;
    int next;
    int now;
  };
  std::vector<Count> kept;
  for (const auto& c : next_spec->computations) {
    if (const auto* now = current.computation(c.name)) kept.push_back({"computation", &c.name, c.partitions, now->partitions});
  }
  for (const auto& s : next_spec->sinks) {
    if (const auto* now = current.sink(s.name)) kept.push_back({"sink", &s.name, s.partitions, now->partitions});
  }
  for (const Count& c : kept) {
    if (c.next != c.now) {
      return Status::invalid_argument(fmt::format("{} {}: {} partitions in the new spec, {} in force; repartition it "
                                                  "separately",
                                                  c.kind, *c.name, c.next, c.now));
    }
  }
  for (const auto& s : next_spec->sources) {
    const SourceSpec* now = current.source(s.name);
    const bool seen = layout.source_generations.count(s.name) != 0;
    if (now != nullptr && source_identity(*now) == source_identity(s)) {
      if (now->partitions != s.partitions) {
        return Status::invalid_argument(fmt::format("source {}: {} partitions in the new spec, {} in force; a "
                                                    "source has its input's partitions (a new input is a new "
                                                    "table or topic)",
                                                    s.name, s.partitions, now->partitions));
      }
      continue;
    }
    // A new input behind this name, or a name that was used before: a new origin.
    if (now != nullptr || seen) {
      next.source_generations[s.name] = (now != nullptr ? now->generation : layout.source_generations.at(s.name)) + 1;
    }
  }
  // Removed sources keep their generation, so that the name's earlier origins stay taken.
  for (const auto& s : current.sources) {
    if (next_spec->source(s.name) == nullptr) next.source_generations[s.name] = s.generation;
  }
  return next;
}

Result<std::map<std::string, int>> parse_repartition(const PipelineSpec& spec, std::string_view text) {
  auto items = name_value_items(text, "NAME=COUNT");
  if (!items) return items.error();
  std::map<std::string, int> out;
  for (const auto& [item_name, number] : *items) {
    const std::string name(item_name);
    int count = 0;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), count);
    if (ec != std::errc() || ptr != number.data() + number.size()) {
      return Status::invalid_argument(fmt::format("expected NAME=COUNT, got '{}={}'", item_name.substr(0, 40),
                                                  number.substr(0, 40)));
    }
    if (count < 1 || count > kMaxPartitions) {
      return Status::invalid_argument(fmt::format("{}: {} partitions; expected 1 to {}", name.substr(0, 40), count, kMaxPartitions));
    }
    const SinkSpec* sink = spec.sink(name);
    if (spec.source(name) != nullptr) {
      return Status::invalid_argument(fmt::format("source {}: a source has its queue's partitions; only computations "
                                                  "and queue sinks are repartitioned",
                                                  name.substr(0, 40)));
    }
    if (spec.computation(name) == nullptr && sink == nullptr) {
      return Status::invalid_argument(fmt::format("no computation or sink named '{}'", name.substr(0, 40)));
    }
    if (sink != nullptr && sink->type != SinkType::kAsyncQueue && sink->type != SinkType::kSyncQueue) {
      return Status::invalid_argument(fmt::format("sink {}: a {} sink's partitions follow its target; only queue sinks "
                                                  "are repartitioned",
                                                  name.substr(0, 40), sink_type_name(sink->type)));
    }
    if (sink != nullptr && sink->target_tablets > 0) {
      return Status::invalid_argument(fmt::format("sink {}: it has one partition per tablet of its sharded target; "
                                                  "reshard the target instead",
                                                  name.substr(0, 40)));
    }
    out[name] = count;
  }
  return out;
}

namespace {

int partition_of_row(std::string_view key) {
  int p = 0;
  const auto [ptr, ec] = std::from_chars(key.data(), key.data() + std::min<size_t>(4, key.size()), p, 16);
  return ec == std::errc() && ptr == key.data() + 4 ? p : -1;
}

// Offers the rows of `table` to `move_one` in key order, a page at a time, with their
// partition, until it has moved `budget` of them (it says whether it moved the row).
Result<size_t> move_rows(Store& store, Transaction& tx, const std::string& table, size_t budget,
                         const std::function<Result<bool>(int partition, const Row& row)>& move_one) {
  size_t moved = 0;
  std::string from;
  while (moved < budget) {
    auto rows = store.scan(tx, table, from, "", 256);
    if (!rows) return rows.error();
    for (const Row& row : *rows) {
      const int p = partition_of_row(row.key);
      if (p < 0) continue;
      auto did = move_one(p, row);
      if (!did) return did.error();
      if (*did && ++moved == budget) break;
    }
    if (rows->size() < 256) break;
    from = rows->back().key + '\0';
  }
  return moved;
}

// Moves the rows of `table` whose key (as `key_of` reads it from a row) belongs to another
// partition under `partitions`; at most `budget` of them.
Result<size_t> move_by_key(Store& store, Transaction& tx, const std::string& table, int partitions, size_t budget,
                           const std::function<std::optional<uint64_t>(const Row&)>& key_of,
                           std::vector<std::pair<std::string, std::string>>* moves) {
  return move_rows(store, tx, table, budget, [&](int p, const Row& row) -> Result<bool> {
    const auto key = key_of(row);
    if (!key) return false;
    const int want = key_partition(*key, partitions);
    if (want == p) return false;
    std::string to = tables::partition_prefix(want) + row.key.substr(5);
    if (moves != nullptr) moves->emplace_back(table + ":" + row.key, table + ":" + to);
    tx.put(table, std::move(to), row.value);
    tx.erase(table, row.key);
    return true;
  });
}

Result<std::vector<Message>> stream_row(Store& store, Transaction& tx, const std::string& table, const std::string& key) {
  auto value = store.get(tx, table, key);
  if (!value) return value.error();
  if (!*value) return std::vector<Message>{};
  return stream_rows::decode_row(table, key, **value);
}

// Splits the stream rows of `table` holding messages whose key belongs to another partition
// under `partitions`: each part goes to its partition under the same key suffix (merged with a
// row already there: one producer epoch's rows of two old partitions may meet in one new
// one); at most `budget` rows split.
Result<size_t> move_stream_rows(Store& store, Transaction& tx, const std::string& table, int partitions,
                                size_t budget) {
  return move_rows(store, tx, table, budget, [&](int p, const Row& row) -> Result<bool> {
    // As this transaction has it now: a part moved here from an earlier row may have merged in.
    auto messages = stream_row(store, tx, table, row.key);
    if (!messages) return messages.error();
    std::map<int, std::vector<Message>> parts;
    for (Message& m : *messages) parts[key_partition(m.key, partitions)].push_back(std::move(m));
    if (parts.empty() || (parts.size() == 1 && parts.begin()->first == p)) return false;
    for (auto& [want, part] : parts) {
      std::string to = tables::partition_prefix(want) + row.key.substr(5);
      if (want != p) {
        auto held = stream_row(store, tx, table, to);
        if (!held) return held.error();
        part.insert(part.begin(), held->begin(), held->end());
      }
      tx.put(table, std::move(to), stream_rows::encode(part));
    }
    if (parts.count(p) == 0) tx.erase(table, row.key);
    return true;
  });
}

// Erases the rows of partitions `partitions` and up.
Result<size_t> erase_from(Store& store, Transaction& tx, const std::string& table, int partitions, size_t budget) {
  auto rows = store.scan(tx, table, tables::partition_prefix(partitions), "~", budget);
  if (!rows) return rows.error();
  for (const Row& row : *rows) tx.erase(table, row.key);
  return rows->size();
}

}  // namespace

Result<size_t> move_partition_rows(Store& store, Transaction& tx, const PipelineSpec& spec, const std::string& owner,
                                   int partitions, size_t page,
                                   std::vector<std::pair<std::string, std::string>>* moved_timers) {
  std::vector<std::string> streams;
  std::vector<std::string> dedup;
  std::vector<std::string> timers;  // tables
  if (const ComputationSpec* c = spec.computation(owner)) {
    streams = c->input_streams;
    dedup = {tables::input_messages(owner), tables::compact_input_messages(owner)};
    timers = tables::timers(*c);
  } else if (const SinkSpec* s = spec.sink(owner)) {
    streams = {s->input_stream};
    dedup = {tables::compact_input_messages("sink:" + owner)};
  }
  size_t moved = 0;
  for (const std::string& stream : streams) {
    auto n = move_stream_rows(store, tx, tables::stream(stream), partitions, page - moved);
    if (!n) return n.error();
    moved += *n;
    if (moved >= page) return moved;
  }
  for (const std::string& table : timers) {
    // <p>/<trigger: 16 hex>/<key: 16 hex>/<stream>[/<unique>]
    const auto timer_key = [](const Row& row) -> std::optional<uint64_t> {
      if (row.key.size() < 38) return std::nullopt;
      return tables::parse_hex16(std::string_view(row.key).substr(22, 16));
    };
    auto n = move_by_key(store, tx, table, partitions, page - moved, timer_key, moved_timers);
    if (!n) return n.error();
    moved += *n;
    if (moved >= page) return moved;
  }
  // Input dedup rows stay: after a drain no producer can emit again anything it emitted
  // before, so nothing they name can come back. Those of partitions that are gone are erased.
  for (const std::string& table : dedup) {
    auto n = erase_from(store, tx, table, partitions, page - moved);
    if (!n) return n.error();
    moved += *n;
    if (moved >= page) return moved;
  }
  return moved;
}

}  // namespace onceflow
