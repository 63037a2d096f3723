// Checkers for the kernel self-test workload, one class per invariant.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "checkers/kernel_history.h"
#include "checkers/verdict.h"

namespace onceflow::checkers {

class KernelChecker {
 public:
  virtual ~KernelChecker() = default;
  virtual std::string_view name() const = 0;
  virtual Verdict check(const KernelHistory& history) const = 0;
};

// Money is neither made nor lost: the balances sum to what they started with.
class ConservationCheck final : public KernelChecker {
 public:
  std::string_view name() const override { return "conservation"; }
  Verdict check(const KernelHistory& history) const override;
};

// Each client's log rows are exactly seq 0..progress-1, and replaying them from the initial
// balances gives the final balances: every committed transfer applied once, nothing else.
class LedgerCheck final : public KernelChecker {
 public:
  std::string_view name() const override { return "ledger"; }
  Verdict check(const KernelHistory& history) const override;
};

// What a client concluded about an ambiguous commit matches the store's commit log.
class AmbiguityResolutionCheck final : public KernelChecker {
 public:
  std::string_view name() const override { return "ambiguous-resolution"; }
  Verdict check(const KernelHistory& history) const override;
};

// No commit was accepted under a Lease outside that Lease's lifetime.
class LeaseFencingCheck final : public KernelChecker {
 public:
  std::string_view name() const override { return "lease-fencing"; }
  Verdict check(const KernelHistory& history) const override;
};

// After the heal phase every client finished within the bound.
class KernelLivenessCheck final : public KernelChecker {
 public:
  std::string_view name() const override { return "liveness"; }
  Verdict check(const KernelHistory& history) const override;
};

std::vector<std::unique_ptr<KernelChecker>> all_kernel_checkers();
std::vector<Verdict> run_kernel_checks(const KernelHistory& history);

}  // namespace onceflow::checkers
