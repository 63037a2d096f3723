// MessageId derivation as properties: the same origin always gives the same id, different
// origins (parents, output indexes, source offsets, timers) never share one, and a batched
// id depends on the set of its parents, not their order. And the message encodings keep
// every field of any message.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/message.h"
#include "core/stream_rows.h"

namespace onceflow {
namespace {

RC_GTEST_PROP(MessageIdProps, DerivationIsDeterministic, (uint64_t parent, uint32_t index, uint64_t offset)) {
  const int partition = *rc::gen::inRange(0, 64);
  RC_ASSERT(derived_message_id(parent, index) == derived_message_id(parent, index));
  RC_ASSERT(source_message_id("src", partition, offset) == source_message_id("src", partition, offset));
  RC_ASSERT(timer_output_id("C", "t1", index) == timer_output_id("C", "t1", index));
  // A chain replayed from its source gives the same ids all the way down.
  const MessageId first = derived_message_id(source_message_id("src", partition, offset), index);
  RC_ASSERT(derived_message_id(first, 0) == derived_message_id(derived_message_id(source_message_id("src", partition, offset), index), 0));
}

// Distinct (parent, output index) pairs, plus source offsets and timer outputs, all differ.
RC_GTEST_PROP(MessageIdProps, DistinctOriginsGiveDistinctIds, ()) {
  const auto parents = *rc::gen::container<std::set<uint64_t>>(rc::gen::arbitrary<uint64_t>());
  const auto indexes = *rc::gen::container<std::set<uint32_t>>(rc::gen::inRange<uint32_t>(0, 1000));
  std::map<MessageId, std::string> seen;
  const auto add = [&](MessageId id, std::string origin) {
    const auto [it, fresh] = seen.emplace(id, origin);
    if (!fresh) RC_FAIL("id " + format_id(id) + " of " + origin + " is also the id of " + it->second);
  };
  for (const uint64_t p : parents) {
    for (const uint32_t i : indexes) add(derived_message_id(p, i), "derived " + format_id(p) + "/" + std::to_string(i));
  }
  for (const uint64_t p : parents) {
    add(source_message_id("src", static_cast<int>(p % 8), p), "source " + std::to_string(p % 8) + "@" + std::to_string(p));
  }
  for (const uint32_t i : indexes) add(timer_output_id("C", "timer-" + std::to_string(i), 0), "timer " + std::to_string(i));
}

RC_GTEST_PROP(MessageIdProps, BatchedIdsIgnoreParentOrder, ()) {
  const auto parents = *rc::gen::nonEmpty(rc::gen::container<std::vector<uint64_t>>(rc::gen::arbitrary<uint64_t>()));
  std::vector<uint64_t> reordered = parents;
  const auto rotation = *rc::gen::inRange<size_t>(0, parents.size());
  std::rotate(reordered.begin(), reordered.begin() + static_cast<long>(rotation), reordered.end());
  if (*rc::gen::arbitrary<bool>()) std::reverse(reordered.begin(), reordered.end());
  RC_ASSERT(batched_message_id("s", 1, 0, parents) == batched_message_id("s", 1, 0, reordered));
}

RC_GTEST_PROP(MessageIdProps, BatchedIdsOfDifferentParentSetsDiffer, ()) {
  const auto a = *rc::gen::nonEmpty(rc::gen::container<std::set<uint64_t>>(rc::gen::inRange<uint64_t>(0, 200)));
  const auto b = *rc::gen::nonEmpty(rc::gen::container<std::set<uint64_t>>(rc::gen::inRange<uint64_t>(0, 200)));
  RC_PRE(a != b);
  RC_ASSERT(batched_message_id("s", 1, 0, {a.begin(), a.end()}) != batched_message_id("s", 1, 0, {b.begin(), b.end()}));
}

RC_GTEST_PROP(MessageIdProps, EncodingRoundTrips, (uint64_t id, uint64_t key, std::string payload)) {
  Message m;
  m.id = id;
  m.key = key;
  m.stream = *rc::gen::element<std::string>("in", "counts", "");
  m.system_ts = *rc::gen::arbitrary<int64_t>();
  m.alignment_ts = *rc::gen::arbitrary<int64_t>();
  m.payload = payload;
  m.parents = *rc::gen::container<std::vector<uint64_t>>(rc::gen::arbitrary<uint64_t>());
  const auto back = decode_message(encode_message(m));
  RC_ASSERT(back.has_value());
  RC_ASSERT(*back == m);
}

// The encodings keep every field of any message exactly, whatever its times (differences
// wrap), alone (encode_message) and in a row of one stream (stream_rows, each system time
// relative to the one before).
RC_GTEST_PROP(MessageIdProps, EncodingsRoundTripAnyMessage, ()) {
  const auto time = rc::gen::oneOf(rc::gen::arbitrary<int64_t>(),
                                   rc::gen::element(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), int64_t{0}),
                                   rc::gen::inRange<int64_t>(1'700'000'000'000'000, 1'700'000'100'000'000));
  // One stream, as a stream row's.
  const auto in_stream = *rc::gen::container<std::vector<Message>>(rc::gen::build<Message>(
      rc::gen::set(&Message::stream, rc::gen::just(std::string("s"))), rc::gen::set(&Message::id), rc::gen::set(&Message::key), rc::gen::set(&Message::system_ts, time),
      rc::gen::set(&Message::event_ts, time), rc::gen::set(&Message::alignment_ts, time), rc::gen::set(&Message::payload),
      rc::gen::set(&Message::parents)));
  for (const Message& m : in_stream) {
    auto back = decode_message(encode_message(m));
    RC_ASSERT(back.has_value());
    RC_ASSERT(*back == m);
  }
  auto row = stream_rows::decode(stream_rows::encode(in_stream));
  RC_ASSERT(row.has_value());
  RC_ASSERT(*row == in_stream);
}

}  // namespace
}  // namespace onceflow
