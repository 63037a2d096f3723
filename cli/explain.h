// onceflow explain: one simulated run as a self-contained HTML page.
//
// The page draws every node against simulated time: the Leases its jobs held, the epochs
// they committed, the faults that hit it, its crashes and refused commits, and the messages
// each sink target made visible. Messages named by a failing check are drawn in red and
// listed. Everything (data, style, script) is inline, so the file opens with no network.
#pragma once

#include <string>

#include "faults/pipeline_run.h"

namespace onceflow::cli {

struct ExplainInput {
  std::string scenario;  // path, as given
  std::string replay;    // the command that reproduces the run
  const faults::PipelineRun* run = nullptr;
};

std::string render_explain_html(const ExplainInput& input);

}  // namespace onceflow::cli
