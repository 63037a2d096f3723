// An onceflow command line with a computation of its own.
//
// Build it next to your code, link onceflow_cli, register your functions by the names your
// pipeline specs use, and hand the registry to cli_main: you get run, explore, replay, list
// and mutants for your pipelines, with every checker.
#include <cctype>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "core/builtin.h"
#include "core/computation.h"

namespace {

// Keeps, per key, the longest word seen so far, and emits it whenever it changes.
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

int main(int argc, char** argv) {
  onceflow::ComputationRegistry registry;
  onceflow::builtin::register_all(registry);  // optional: keep the built-ins too
  registry.add("LongestWord", [] { return std::make_unique<LongestWord>(); });
  return onceflow::cli_main(argc, argv, registry);
}
