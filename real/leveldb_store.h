// LevelDbStore: the Store of a single-process deployment, on LevelDB.
//
// - Durable: a commit is one LevelDB WriteBatch (the rows, the new version), written with
//   sync=true unless Options::sync is off, so an acknowledged commit survives a kill -9.
// - Snapshot reads: begin() takes a LevelDB snapshot; reads see it plus the transaction's
//   own buffered writes.
// - Write-write conflicts: the version of the last commit to each key written since the
//   store opened is kept in memory (what came before is older than every snapshot) and
//   pruned below the oldest open snapshot.
// - Leases live in memory and end by this store's clock. Their ids carry the store's
//   generation, which is incremented and synced at every open: a restarted process sees
//   every Lease of its previous life as expired, so no owner from then can commit.
// - A commit is ambiguous only when LevelDB fails the write (it may still be in the log and
//   replayed on reopen): the store then refuses further commits until reopened. resolve()
//   answers from the outcomes of this life and fences a transaction it has not seen commit.
// - A transaction left open longer than Options::tx_timeout_us is ended by the store.
// - Damage is refused, never papered over: LevelDB runs with paranoid checks and verifies
//   every checksum it reads; a directory holding LevelDB files but no CURRENT (a store that
//   was reset or half deleted) is not opened as a new store, unless all it holds is what a
//   creation killed before LevelDB wrote CURRENT leaves (its first manifest and CURRENT's
//   temporary file: nothing that ever held a row), which is removed and the store made
//   again; and once LevelDB reports a
//   corruption or an I/O error (at a read, a write, or a compaction behind a later write,
//   a full disk included) the store is failed(): it answers every further call with that
//   error, and its owner stops. Nothing is lost by that: what was committed stays committed,
//   and a reopening after the cause is gone resumes from it. Damage LevelDB cannot see (its
//   newest log cut short reads as a crash mid-write, and the commits after the cut vanish
//   without a word) the commit point tells (Options::commit_point_file, real/commit_point.h).
//
// - Group commit (set_loop): a commit from a fiber of the loop is validated at once
//   (prerequisites and conflicts, in call order, exactly as alone) and joins the group of
//   commits that will be written together, as one synced WriteBatch, off the loop's thread;
//   the fiber resumes with its own outcome once that write is done, and the other fibers run
//   meanwhile. Commits that arrive while a group is being written form the next group, and
//   that group is written as soon as the write ends, before the fibers of the written group
//   resume: the disk works while the loop runs the epochs those fibers begin next (their
//   next commits wait for the write after that one: when the loop keeps up with the disk,
//   the fibers settle into two cohorts whose groups alternate). A
//   transaction begun meanwhile reads the last written state: its writes conflict with those
//   of a commit still being written. Without a loop, or outside a fiber, each commit is its
//   own synced write.
//
// Thread-safety: none; one runtime's fibers use it (only a group commit suspends).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/env/store.h"
#include "real/empty_ranges.h"
#include "real/real_store.h"
#include "fibers/scheduler.h"

namespace leveldb {
class DB;
class Env;
class Snapshot;
class Status;
}  // namespace leveldb

namespace onceflow::real {

class LevelDbStore final : public RealStore {
 public:
  struct Options {
    bool sync = true;  // fsync each commit (off only for benchmarks of the difference)
    // Snappy-compress table files. Off: most rows are written once and erased soon after, and
    // the loop thread's reads then skip decompression (the two-stage bench pipeline: 8% more
    // messages a second, 18% less CPU, 1.6 times the disk: 41 MB against 26 MB after 200,000).
    bool compress = false;
    // LevelDB's write buffer (its memtable). Rows are mostly read soon after they are written:
    // from the memtable a range read is one seek, from table files one per file. 16 MB made
    // the bench pipeline 10-12% faster than LevelDB's 4 MB (59,451 / 67,737 -> 66,799 / 74,747
    // msgs/s, runs taken in turns) but its latency tail worse, as each flush of a larger
    // memtable stalls the synced writes longer: at 32,000 msgs/s p99 53-60 ms at 4 MB, 78-90
    // ms at 16 MB (docs/BENCHMARKS.md). The tail is the shorter at 4 MB: 4 MB it is. Measured
    // before table files were written paced (real/leveldb_env.h), which shortened each flush's
    // stall: since then 8 and 16 MB made no difference in messages a second, and their
    // latency has not been measured again.
    size_t write_buffer_bytes = size_t{4} << 20;
    // A transaction open longer than this (by the store's clock) is over: its snapshot is
    // released, and it can no longer read or commit. Bounds what a forgotten one pins.
    Micros tx_timeout_us = 60 * kSeconds;
    // LevelDB's file system; null for the default one. Tests hand in one that fails writes.
    leveldb::Env* env = nullptr;
    // Where the store records its commit point (real/commit_point.h); empty: nowhere. A
    // store behind the point recorded there is refused at open (kCorruption).
    std::string commit_point_file;
    // Between two records of the commit point while commits go on (each a small file written
    // and synced off the loop's thread, with a group's write): what was committed less than
    // this long before a crash can be lost with the store's newest files unnoticed. It is
    // recorded at every open and clean close too; with sync off, only at open.
    Micros commit_point_every_us = 1 * kSeconds;
  };
  // Opens (creating if needed) the store in `dir`. `clock` times Leases; it must outlive
  // the store.
  static Result<std::unique_ptr<LevelDbStore>> open(const std::string& dir, const Clock& clock, Options options);
  static Result<std::unique_ptr<LevelDbStore>> open(const std::string& dir, const Clock& clock) {
    return open(dir, clock, Options{});
  }
  // Records the commit point (when the store has a file for it and has not failed).
  ~LevelDbStore() override;

  Result<LeaseId> start_lease(Micros ttl_us) override;
  Status ping_lease(LeaseId lease) override;
  Status abort_lease(LeaseId lease) override;
  Result<LeaseState> lease_state(LeaseId lease) override;

  Result<Transaction> begin() override;
  Result<Version> commit(const Transaction& tx, const std::vector<LeaseId>& prerequisites) override;
  void abort(const Transaction& tx) override;
  Result<TxOutcome> resolve(TxId tx, Version* version = nullptr) override;

  // Commits from fibers of `loop` are grouped (see above). `loop` must outlive the store's
  // use from it; nullptr turns grouping off. A group still forming when its loop is let go
  // (the loop ended and unwound the fibers that formed it) is never written: its commits did
  // not happen, as though the process had ended a moment sooner.
  void set_loop(RealLoop* loop) override;

  uint64_t generation() const { return generation_; }
  // Whether this open made a new, empty store.
  bool created() const { return generation_ == 1; }
  // OK, or the corruption or I/O error that failed the store (it names the directory).
  const Status& failed() const override { return failed_; }
  const std::string& dir() const { return dir_; }
  std::string where() const override { return dir_; }
  Version last_version() const { return version_; }
  size_t open_transactions() const { return open_.size(); }
  // Whether a group's synced write is under way (tests).
  bool writing() const { return writing_; }
  Stats stats() const override { return stats_; }

  Result<std::vector<Row>> dump(const std::string& table) override;
  Result<bool> any_rows(const std::string& table_prefix) override;
  Result<std::vector<std::string>> table_names(const std::string& table_prefix) override;

 protected:
  Result<std::optional<std::string>> read(const Transaction& tx, const std::string& table,
                                          const std::string& key) override;
  Result<std::vector<Row>> read_range(const Transaction& tx, const std::string& table, const std::string& from,
                                      const std::string& to, size_t limit) override;

 private:
  struct Lease {
    Micros ttl_us = 0;
    Micros last_ping = 0;
    LeaseState ended = LeaseState::kActive;  // kAborted once aborted
  };
  // Commits written together (group commit).
  struct Group;
  struct OpenTx {
    const leveldb::Snapshot* snapshot = nullptr;
    Version version = 0;
    Micros began_at = 0;
  };

  LevelDbStore(std::unique_ptr<leveldb::DB> db, std::string dir, const Clock& clock, Options options,
               uint64_t generation, Version version);
  // Maps a LevelDB status to ours; any error but "not found" fails the store for good.
  Status check(const leveldb::Status& s);
  LeaseState state_of(LeaseId lease) const;
  const OpenTx* find_open(const Transaction& tx) const;
  void release(TxId tx);
  void prune_conflict_index();
  // A commit passed validation at `version`: the conflict index and the empty ranges learn
  // its writes before anyone can see them.
  void validated(const Transaction& tx, Version version, const std::vector<uint64_t>& hashes);
  void end_stale_transactions();
  // Bookkeeping of a commit that is written: its version, its outcome for resolve().
  void committed(TxId tx, Version version, size_t writes);
  Result<Version> commit_in_group(const Transaction& tx, const std::vector<uint64_t>& hashes);
  void write_group();
  void refuse_forming();  // the store failed: the forming group is never written
  void abandon_forming();  // the loop let go: the forming group is never written
  // Whether the commit point is due for a record after a write that ends now.
  bool commit_point_due() const;
  // Records {version, generation_} as the commit point: the caller's thread does the I/O.
  Status record_commit_point(Version version) const;

  // From a fiber: returns once every commit up to `version` is written (or the store failed).
  void wait_until_written(Version version);

  std::unique_ptr<leveldb::DB> db_;
  std::string dir_;
  const Clock& clock_;
  Options options_;
  uint64_t generation_;
  Version version_;
  uint64_t next_lease_ = 1;
  uint64_t next_tx_ = 1;
  std::map<LeaseId, Lease> leases_;
  std::map<TxId, OpenTx> open_;
  std::map<TxId, Version> committed_;  // outcomes of this life, for resolve()
  TxId forgotten_below_ = 0;           // outcomes of older transactions were dropped
  Status failed_;                      // set by the first LevelDB error: all is refused then
  // The conflict index: by a 64-bit hash of (table, key), the version of the last write. A
  // collision can only refuse a commit that would not conflict (it is retried), never the
  // other way round.
  std::unordered_map<uint64_t, Version> last_write_;
  std::deque<std::pair<Version, uint64_t>> written_;  // (version, hash) of each write, for pruning
  EmptyRanges empty_;  // where scans need not walk tombstones
  uint64_t commits_since_prune_ = 0;
  Stats stats_;
  RealLoop* loop_ = nullptr;
  Version assigned_ = 0;            // the last version given to a commit, written or not
  Micros commit_point_at_ = 0;      // when the commit point was last recorded (the store's clock)
  std::shared_ptr<Group> forming_;  // commits waiting for the next write
  bool writing_ = false;            // a group's write is under way
  std::map<TxId, Version> pending_; // validated commits not yet written, for resolve()
  std::vector<fibers::Scheduler::WakeToken> written_waiters_;  // wait_until_written()
};

}  // namespace onceflow::real
