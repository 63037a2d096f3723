// BankWorkload: the kernel's self-test workload.
//
// A store node and N client nodes. Each client keeps a Lease alive on one fiber and, on
// another, makes `transfers_per_client` transfers: in one store transaction guarded by its
// Lease it reads two account balances, moves an amount between them, writes a log row and
// advances its progress counter. On kAmbiguous it asks the store (resolve) and records the
// answer. Each transfer also sends an "audit" RPC to a random peer. Everything a client
// knows lives in its process, so a crash loses it and the restarted client resumes from the
// store. The workload records what it observed in a KernelHistory for the checkers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkers/kernel_history.h"
#include "sim/store.h"
#include "sim/world.h"

namespace onceflow::sim {

class BankWorkload {
 public:
  struct Options {
    int clients = 4;
    int accounts = 8;
    int64_t initial_balance = 100;
    uint64_t transfers_per_client = 40;
    Micros think_time_us_max = 250 * kMillis;  // pause between transfers, uniform
    Micros lease_ttl_us = 2 * kSeconds;
    Micros ping_interval_us = 400 * kMillis;
    Micros rpc_timeout_us = 50 * kMillis;
    Micros retry_backoff_us = 20 * kMillis;
    // Percent of operations that close an account instead of a transfer: its row deleted and
    // its balance parked under the client, until the client's next operation re-creates it.
    int close_percent = 0;
    StoreOptions store;
  };

  BankWorkload(World& world, StoreData& data, Options options);
  ~BankWorkload();

  // Adds and starts the store and client nodes, and seeds the accounts.
  void start();
  const std::vector<std::string>& client_names() const { return clients_; }
  static constexpr const char* kStoreNode = "store";

  // True once every client has made all its transfers (as the store shows).
  bool drained() const;
  // The history for the checkers, read from the store and from what clients recorded.
  checkers::KernelHistory history(Micros heal_at_us, Micros liveness_bound_us,
                                  Micros drained_at_us) const;

  // What clients report outside their volatile memory (the observer's notebook).
  struct Observations {
    std::vector<checkers::KernelHistory::Resolution> resolutions;
    uint64_t commits_ok = 0, conflicts = 0, fenced = 0, ambiguous = 0, unavailable = 0;
    uint64_t audits_ok = 0, audits_failed = 0;
  };
  const Observations& observations() const { return seen_; }

 private:
  class Client;

  World& world_;
  StoreData& data_;
  Options options_;
  std::vector<std::string> clients_;
  Observations seen_;
};

}  // namespace onceflow::sim
