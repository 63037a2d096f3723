#include "cli/replay_filter.h"

#include <gtest/gtest.h>

namespace onceflow::cli {
namespace {

// replay --id shows a message's commit attempts and the store's answers to them: an attempt
// rejected or committed reads as such, not as one more "produced [id]".
TEST(ReplayFilterTest, ACommitAttemptAndTheStoresAnswerNameTheirTransaction) {
  const std::set<uint64_t> txs{78};
  EXPECT_TRUE(names_commit_tx("computation/Inventory/0 lease 10 commits tx 78: consumed [] produced [daab642c1259dbed]", txs));
  EXPECT_TRUE(names_commit_tx("commit tx 78 rejected: lease 10 is expired", txs));
  EXPECT_TRUE(names_commit_tx("commit tx 78 version 5 writes 3", txs));
  EXPECT_FALSE(names_commit_tx("commit tx 780 rejected: lease 10 is expired", txs));
  EXPECT_FALSE(names_commit_tx("computation/Inventory/0 lease 10 commits tx 79: consumed []", txs));
  EXPECT_FALSE(names_commit_tx("recommit tx 78", txs));
  EXPECT_FALSE(names_commit_tx("commit tx 78 rejected: lease 10 is expired", {}));
}

}  // namespace
}  // namespace onceflow::cli
