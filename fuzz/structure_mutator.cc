// The fuzz target's structure-aware mode (libFuzzer's custom mutator): half the time an input
// whose text is a YAML document (a scenario or a spec; the first byte picks the reader, as in
// input_fuzz.cc) is parsed and changed as a tree, then written back: a value replaced by one
// the readers treat specially or by another value of the same document, a key dropped or
// doubled under a new name, two entries of a list or map swapped, a subtree copied elsewhere,
// a node wrapped in a list. Such inputs stay YAML and keep most of their keys, so they reach
// the checks after parsing, which byte mutations mostly break before. The other half, and any
// input that does not parse (or that the bounded walk refuses), gets libFuzzer's own byte
// mutations.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/input_checks.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

const char* const kValues[] = {"0", "-1", "1", "2", "65", "4097", "100000", "1e300", "0.5", "", "~", "true", "1ms",
                               "0s", "-5s", "3600s", "2147483648s", "999999999999999999999", "exactly_once",
                               "at_least_once", "at_most_once", "queue", "service_log", "kafka", "static_table",
                               "stopped", "stopped now", "event", "response", "request", "crash", "worker-1", "store",
                               "controller", "nowhere", "pipelines/keyed_aggregation.yaml", "/dev/null", "x"};

// Every node of the document, parents before children; a bounded walk (the input passed
// yaml_problem, so there is no alias cycle and no more nodes than it allows).
void collect(YAML::Node node, std::vector<YAML::Node>* out, int depth) {
  if (depth > 64 || out->size() > 20000) return;
  out->push_back(node);
  if (node.IsSequence()) {
    for (auto child : node) collect(child, out, depth + 1);
  } else if (node.IsMap()) {
    for (auto entry : node) collect(entry.second, out, depth + 1);
  }
}

bool mutate_tree(YAML::Node& root, std::mt19937_64& rng) {
  std::vector<YAML::Node> nodes;
  collect(root, &nodes, 0);
  if (nodes.empty()) return false;
  const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  YAML::Node target = nodes[pick(nodes.size())];
  switch (pick(6)) {
    case 0:  // a value the readers treat specially
      target = std::string(kValues[pick(std::size(kValues))]);
      return true;
    case 1: {  // another value of this document
      YAML::Node other = nodes[pick(nodes.size())];
      if (other.IsScalar()) target = other.Scalar();
      return other.IsScalar();
    }
    case 2: {  // a key dropped, or doubled under a new name
      if (!target.IsMap() || target.size() == 0) return false;
      std::vector<std::string> keys;
      for (auto entry : target) {
        if (entry.first.IsScalar()) keys.push_back(entry.first.Scalar());
      }
      if (keys.empty()) return false;
      const std::string key = keys[pick(keys.size())];
      if (rng() % 2 == 0) {
        target.remove(key);
      } else {
        target[key + "_" + std::to_string(pick(3))] = YAML::Clone(target[key]);
      }
      return true;
    }
    case 3: {  // two entries of a list swapped
      if (!target.IsSequence() || target.size() < 2) return false;
      const size_t a = pick(target.size()), b = pick(target.size());
      YAML::Node first = YAML::Clone(target[a]);
      target[a] = YAML::Clone(target[b]);
      target[b] = first;
      return true;
    }
    case 4: {  // a subtree copied over another node
      YAML::Node source = nodes[pick(nodes.size())];
      target = YAML::Clone(source);
      return true;
    }
    default: {  // a node wrapped in a list
      YAML::Node list(YAML::NodeType::Sequence);
      list.push_back(YAML::Clone(target));
      target = list;
      return true;
    }
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  const bool yaml_reader = size > 1 && data[0] % 3 != 2;
  if (!yaml_reader || rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  try {
    YAML::Node root = YAML::Load(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
    if (onceflow::yaml_problem(root) || !mutate_tree(root, rng)) return LLVMFuzzerMutate(data, size, max_size);
    YAML::Emitter out;
    out << root;
    if (!out.good() || out.size() + 1 > max_size) return LLVMFuzzerMutate(data, size, max_size);
    std::memcpy(data + 1, out.c_str(), out.size());
    return out.size() + 1;
  } catch (const YAML::Exception&) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
}
