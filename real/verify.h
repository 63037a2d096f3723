// --verify for `onceflow real`: reads back what a finished run delivered and holds, runs the
// delivery and state checkers against the reference run of its recorded input (the input log
// and the input topics), and prints one JSON object on stdout.
#pragma once

#include "core/computation.h"
#include "core/spec.h"
#include "real/kafka.h"
#include "real/real_store.h"

namespace onceflow::real {

// Returns the exit code: 0 every check passed, 1 one failed; an error when something could
// not be read (the caller reports it, exit 2).
Result<int> verify_run(const PipelineSpec& spec, const ComputationRegistry& registry, RealStore& store,
                       const KafkaConfig& kafka);

}  // namespace onceflow::real
