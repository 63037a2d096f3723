#include "core/probes.h"

namespace onceflow {

std::optional<Probe> parse_probe(std::string_view name) {
  for (const ProbeInfo& p : kProbes) {
    if (p.name == name) return p.probe;
  }
  return std::nullopt;
}

}  // namespace onceflow
