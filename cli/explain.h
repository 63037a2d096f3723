// onceflow explain: one simulated run as a self-contained HTML page.
//
// The page draws every node, and under it every job that ran there, against simulated time
// (in milliseconds): the Leases the jobs held, the epochs they committed, the faults that hit
// the node (by kind), its crashes and refused commits, and the messages each sink target made
// visible, each linked to the commit that decided it. Messages named by a failing check are
// drawn in red and listed; a failing run's page opens zoomed on its first violation.
// Everything (data, style, script) is inline, so the file opens with no network.
#pragma once

#include <string>

#include "simulated/pipeline_run.h"

namespace onceflow::cli {

struct ExplainInput {
  std::string scenario;  // path, as given
  std::string replay;    // the command that reproduces the run
  const simulated::PipelineRun* run = nullptr;
};

std::string render_explain_html(const ExplainInput& input);

}  // namespace onceflow::cli
