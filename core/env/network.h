// Network: request/response between named nodes.
//
// A node serves named services; another node calls them. Every call ends: with the reply,
// with the handler's error Status, with kTimeout (no reply in time: the request may or may
// not have been handled, perhaps more than once) or with kUnreachable (the peer refused: the
// request was not handled). Handlers run on a fresh fiber of the serving node and may
// suspend. Thread-safety: the same as the node's Runtime.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/env/clock.h"
#include "core/env/status.h"

namespace onceflow {

// Handles one request from node `from`; its Result travels back to the caller.
using RpcHandler =
    std::function<Result<std::string>(const std::string& from, std::string_view request)>;

class Network {
 public:
  virtual ~Network() = default;

  // The name of the node this endpoint belongs to.
  virtual const std::string& self() const = 0;

  // Registers (or replaces) the handler of `service` on this node.
  virtual void serve(const std::string& service, RpcHandler handler) = 0;

  // Sends `request` to `service` on node `to` and suspends until the reply or `timeout_us`.
  // REQUIRES: called on a fiber; timeout_us > 0.
  virtual Result<std::string> call(const std::string& to, const std::string& service,
                                   std::string request, Micros timeout_us) = 0;
};

}  // namespace onceflow
