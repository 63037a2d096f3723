#include "my_computations.h"

#include <memory>
#include <string>

namespace my {
namespace {

class LongestWord final : public onceflow::ProcessFunction {
 public:
  void init(const onceflow::InitContext& init) override { init.init_state_client(longest_, "longest"); }

  void process_message(const onceflow::Message& m, onceflow::OutputCollector& out,
                       onceflow::RuntimeContext&) override {
    const std::string best = longest_.get(m.key).value_or("");
    if (m.payload.size() <= best.size()) return;
    longest_.set(m.key, m.payload);
    out.add_message(m.key, "longest so far: " + m.payload);
  }

 private:
  onceflow::StateClient longest_;
};

}  // namespace

void register_my_computations(onceflow::ComputationRegistry& registry) {
  registry.add("LongestWord", [] { return std::make_unique<LongestWord>(); });
}

}  // namespace my
