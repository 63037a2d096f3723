// What the controller's files share (core/controller.cc, controller_rows.cc,
// controller_leadership.cc, controller_schedule.cc, controller_layout.cc,
// controller_requests.cc): the keys of its rows. Included by those files only.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <string>

#include "core/controller.h"
#include "core/env/codec.h"
#include "core/job.h"

namespace onceflow {

inline constexpr const char* kStateKey = "state";
inline constexpr const char* kStateSeqKey = "state_seq";
inline const std::string kJobPrefix = kJobKeyPrefix;
inline constexpr size_t kMaxJobs = 1'000'000;

}  // namespace onceflow
