// The history of a run of the kernel self-test workload (sim/bank_workload.h), as plain data.
//
// Clients move money between accounts in store transactions guarded by their Lease; every
// transfer also writes a log row and advances the client's progress counter. The history
// holds what the store ended with, what the clients concluded about ambiguous commits, the
// commit log and the Lease lifecycle. The checkers read only this.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace onceflow::checkers {

struct KernelHistory {
  struct Transfer {
    std::string client;
    uint64_t seq = 0;
    std::string from, to;
    int64_t amount = 0;
  };
  struct Resolution {  // a client's conclusion about one ambiguous commit
    std::string client;
    uint64_t tx = 0;
    bool committed = false;
  };
  struct Commit {
    uint64_t tx = 0;
    int64_t store_time_us = 0;
    std::vector<uint64_t> prerequisites;
  };
  struct Lease {
    int64_t started_at_us = 0;
    int64_t ended_at_us = -1;  // -1: still active
  };

  uint64_t seed = 0;
  int64_t initial_balance = 0;
  std::vector<std::string> accounts;           // every account the workload opened
  std::map<std::string, int64_t> balances;     // account -> final balance in the store
  std::map<std::string, int64_t> parked;       // account closed and not yet reopened -> its parked balance
  std::vector<Transfer> log;                   // transfer rows in the store
  std::map<std::string, uint64_t> progress;    // client -> transfers committed (store)
  std::map<std::string, uint64_t> target;      // client -> transfers it had to make
  std::vector<Resolution> resolutions;
  std::vector<Commit> commits;                 // the store's commit log
  std::map<uint64_t, Lease> leases;
  int64_t heal_at_us = 0;
  int64_t liveness_bound_us = 0;
  int64_t drained_at_us = -1;  // when every client had made its transfers; -1: never
};

}  // namespace onceflow::checkers
