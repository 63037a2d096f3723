#include "my_computations.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>

#include "checkers/history.h"
#include "checkers/verdict.h"
#include "core/user_code.h"

namespace my {
namespace {

constexpr size_t kLongestWord = 64;  // the workload's words are shorter

class LongestWord final : public onceflow::ProcessFunction {
 public:
  void init(const onceflow::InitContext& init) override { init.init_state_client(longest_, "longest"); }

  void process_message(const onceflow::Message& m, onceflow::OutputCollector& out,
                       onceflow::RuntimeContext&) override {
    std::string best = longest_.get(m.key).value_or("");
    // The mistake a cache invites (bug switch cache-outlives-epoch): a member variable keeps
    // what an epoch that never committed wrote, while the state forgot it.
    if (ONCEFLOW_BUG("cache-outlives-epoch")) {
      if (auto cached = cache_.find(m.key); cached != cache_.end()) best = cached->second;
    }
    // A rare path of your own, made to happen under test: here, a cache of the state that
    // missed, so the state is read again (the answer must not change).
    if (ONCEFLOW_BUGGIFY("the longest-word cache misses")) best = longest_.get(m.key).value_or("");
    ONCEFLOW_ALWAYS(best.size() <= kLongestWord, "a stored word is at most 64 bytes",
                    fmt::format("key {} holds {} bytes", m.key, best.size()));
    const bool longer = ONCEFLOW_BUG("shorter-wins") ? m.payload.size() < best.size() || best.empty()
                                                     : m.payload.size() > best.size();
    if (!longer) {
      ONCEFLOW_REACHABLE("a word no longer than the key's longest is passed over");
      // A variant that must change nothing a check sees (harmless switch rewrite-unchanged):
      // the kept word written back, the same state through more writes.
      if (ONCEFLOW_BUG("rewrite-unchanged") && !best.empty()) longest_.set(m.key, best);
      return;
    }
    ONCEFLOW_SOMETIMES(!best.empty(), "a longer word replaces a shorter one");
    if (m.payload.empty()) ONCEFLOW_UNREACHABLE("an empty word is stored", fmt::format("key {}", m.key));
    longest_.set(m.key, m.payload);
    cache_[m.key] = m.payload;
    out.add_message(m.key, "longest so far: " + m.payload);
  }

 private:
  onceflow::StateClient longest_;
  std::map<uint64_t, std::string> cache_;
};

// The invariant: at the end, each key's state holds a word as long as its longest input.
onceflow::checkers::Verdict each_key_keeps_its_longest_word(const onceflow::checkers::PipelineHistory& h) {
  const auto table = h.tables.find("state/LongestWord/longest");
  if (h.source_inputs.empty() || table == h.tables.end()) {
    return onceflow::checkers::Verdict::not_applicable("", "no inputs or no state to compare");
  }
  std::map<std::string, size_t> longest;  // key (16 hex digits) -> longest input
  for (const auto& in : h.source_inputs) {
    size_t& n = longest[fmt::format("{:016x}", in.key)];
    n = std::max(n, in.payload.size());
  }
  for (const auto& [key, n] : longest) {
    const auto held = table->second.find(key);
    const size_t kept = held == table->second.end() ? 0 : held->second.size();
    if (kept != n) {
      return onceflow::checkers::Verdict::fail("", fmt::format("key {} keeps a word of {} bytes; its longest input has {}", key, kept, n));
    }
  }
  return onceflow::checkers::Verdict::pass("", fmt::format("{} keys", longest.size()));
}

}  // namespace

void register_my_computations(onceflow::ComputationRegistry& registry) {
  registry.add("LongestWord", [] { return std::make_unique<LongestWord>(); });
  registry.add_check("each key keeps its longest word", each_key_keeps_its_longest_word);
  registry.add_bug("shorter-wins", "LongestWord keeps the shorter word");
  registry.add_bug("cache-outlives-epoch", "LongestWord trusts a member-variable cache over its state");
  registry.add_harmless_switch("rewrite-unchanged", "LongestWord writes back the word it keeps");
}

}  // namespace my
