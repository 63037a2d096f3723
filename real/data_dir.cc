#include "real/data_dir.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/env/random.h"
#include "core/message.h"

namespace onceflow::real {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMetaTable = "real/meta";
constexpr const char* kMarkerFile = "onceflow-data";
constexpr const char* kCommitPointFile = "commit-point";

std::string marker_text(const DataIdentity& id) {
  return fmt::format("onceflow data directory\nformat {}\npipeline {}\nshape {}\n", id.format, id.pipeline, id.shape);
}

// What DIR/onceflow-data says, or nullopt when there is none.
Result<std::optional<DataIdentity>> read_marker(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::optional<DataIdentity>();
  std::ifstream in(file);
  std::string line;
  DataIdentity id;
  id.format = 0;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, value;
    words >> key;
    std::getline(words >> std::ws, value);
    if (key == "format") id.format = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    if (key == "pipeline") id.pipeline = value;
    if (key == "shape") id.shape = value;
  }
  if (in.bad()) return Status::unavailable(fmt::format("cannot read {}", file.string()));
  return std::optional<DataIdentity>(id);
}

Status write_marker(const fs::path& file, const DataIdentity& id) {
  const fs::path temp = file.string() + ".new";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << marker_text(id);
    out.flush();
    if (!out) return Status::unavailable(fmt::format("cannot write {}", temp.string()));
  }
  std::error_code ec;
  fs::rename(temp, file, ec);
  if (ec) return Status::unavailable(fmt::format("cannot write {}: {}", file.string(), ec.message()));
  return Status::ok();
}

Result<std::optional<DataIdentity>> read_identity(RealStore& store) {
  auto rows = store.dump(kMetaTable);
  if (!rows) return rows.error();
  if (rows->empty()) return std::optional<DataIdentity>();
  DataIdentity id;
  id.format = 0;
  for (const Row& row : *rows) {
    if (row.key == "format") id.format = static_cast<uint32_t>(std::strtoul(row.value.c_str(), nullptr, 10));
    if (row.key == "pipeline") id.pipeline = row.value;
    if (row.key == "shape") id.shape = row.value;
  }
  return std::optional<DataIdentity>(id);
}

Status write_identity(RealStore& store, const DataIdentity& id) {
  auto tx = store.begin();
  if (!tx) return tx.error();
  tx->put(kMetaTable, "format", std::to_string(id.format));
  tx->put(kMetaTable, "pipeline", id.pipeline);
  tx->put(kMetaTable, "shape", id.shape);
  auto committed = store.commit(*tx, {});
  return committed ? Status::ok() : committed.error();
}

// `another`: what to give instead ("another --data").
Status mismatch(const std::string& dir, const DataIdentity& stored, const DataIdentity& wanted,
                const std::string& another = "another --data") {
  if (stored.format != wanted.format) {
    return Status::invalid_argument(fmt::format(
        "{} holds data of format {}, this build reads format {}: it cannot be resumed by this build (start afresh "
        "with {})",
        dir, stored.format, wanted.format, another));
  }
  return Status::invalid_argument(
      fmt::format("{} was made for pipeline '{}' (shape {}), not for this spec's '{}' (shape {}): use the spec it was "
                  "made with, or {}",
                  dir, stored.pipeline, stored.shape, wanted.pipeline, wanted.shape, another));
}

Status reset_store(const std::string& dir, const fs::path& marker_file, const DataIdentity& held) {
  return Status::corruption(
      fmt::format("{}/store is missing or empty, but {} says it held {}: the store was deleted or reset; refusing to "
                  "start afresh (move {} away to start a new run)",
                  dir, marker_file.string(), held.describe(), dir));
}

}  // namespace

std::string DataIdentity::describe() const {
  return fmt::format("format {}, pipeline '{}' (shape {})", format, pipeline, shape);
}

DataIdentity identity_of(const PipelineSpec& spec) {
  return DataIdentity{kDataFormatVersion, spec.name, format_id(hash_bytes(table_shape(spec)))};
}

Result<std::unique_ptr<LevelDbStore>> open_data_dir(const std::string& dir, const PipelineSpec& spec,
                                                     const Clock& clock, LevelDbStore::Options options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::invalid_argument(fmt::format("cannot create --data {}: {}", dir, ec.message()));
  const fs::path marker_file = fs::path(dir) / kMarkerFile;
  auto marker = read_marker(marker_file);
  if (!marker) return marker.error();
  const fs::path store_dir = fs::path(dir) / "store";
  // A store that is gone under its marker; one with files left but no CURRENT the store's own
  // check refuses, more precisely.
  const bool store_gone = !fs::exists(store_dir, ec) || fs::is_empty(store_dir, ec);
  if (*marker && store_gone) return reset_store(dir, marker_file, **marker);
  options.commit_point_file = (fs::path(dir) / kCommitPointFile).string();
  auto store = LevelDbStore::open(store_dir.string(), clock, options);
  if (!store) return store.error();
  const DataIdentity wanted = identity_of(spec);
  auto stored = read_identity(**store);
  if (!stored) return stored.error();
  if (!*stored) {
    auto any = (*store)->any_rows("");
    if (!any) return any.error();
    if ((*store)->created() || !*any) {
      // A new store. It is new by mistake when the marker says this directory had one.
      if (*marker) return reset_store(dir, marker_file, **marker);
      if (Status s = write_identity(**store, wanted); !s.is_ok()) return s;
    } else {
      DataIdentity old;
      old.format = 0;
      return mismatch(dir, old, wanted);
    }
  } else if (**stored != wanted) {
    return mismatch(dir, **stored, wanted);
  }
  if (!*marker || **marker != wanted) {
    if (Status s = write_marker(marker_file, wanted); !s.is_ok()) return s;
  }
  return std::move(*store);
}

Result<std::unique_ptr<PgStore>> open_pg_store(const std::string& conninfo, const PipelineSpec& spec,
                                               bool existing_only) {
  PgStore::Options options;
  options.existing_only = existing_only;
  auto store = PgStore::open(conninfo, options);
  if (!store) return store.error();
  const DataIdentity wanted = identity_of(spec);
  const std::string where = (*store)->where();
  // The processes of a deployment may all start at once on a new database: one of them
  // records the identity, and the others read it on their next look.
  for (int attempt = 0;; ++attempt) {
    auto stored = read_identity(**store);
    if (!stored) return stored.error();
    if (*stored) {
      if (**stored != wanted) return mismatch(where, **stored, wanted, "another database");
      return std::move(*store);
    }
    if (existing_only) {
      return Status::not_found(fmt::format("{} holds no store of a pipeline (onceflow real makes one)", where));
    }
    auto any = (*store)->any_rows("");
    if (!any) return any.error();
    Status written;
    if (!*any) written = write_identity(**store, wanted);
    if (*any || !written.is_ok()) {
      if (attempt < 3) continue;  // another process may have just written it
      if (!written.is_ok()) return written;
      return Status::invalid_argument(fmt::format("{} holds onceflow rows of no recorded pipeline: use another database", where));
    }
    return std::move(*store);
  }
}

}  // namespace onceflow::real
