// One fuzz target over onceflow's three readers of user input: the scenario file reader, the
// pipeline spec reader and the command line. The first byte picks the reader; the rest is the
// input: a file's text, or the arguments one per line. Whatever the input, the reader must
// return (an error is fine), not crash, hang or trip a sanitizer.
//
// Built two ways (fuzz/CMakeLists.txt): with libFuzzer (clang, ONCEFLOW_FUZZ=ON) to search,
// and with a plain main (fuzz/regress_main.cc) that runs the kept corpus as regression cases.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/scenario.h"
#include "core/spec.h"

namespace {

// A directory of this process holding the library's pipeline specs, so that a scenario's
// `pipeline: pipelines/x.yaml` resolves as it does in scenarios/.
const std::string& work_dir() {
  // Never destroyed: the exit handler below still needs it.
  static const std::string* const dir = new std::string([] {
    namespace fs = std::filesystem;
    const fs::path d = fs::temp_directory_path() / ("onceflow-fuzz-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::create_directories(d, ec);
    fs::copy(fs::path(ONCEFLOW_SOURCE_DIR) / "scenarios" / "pipelines", d / "pipelines",
             fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(work_dir(), ignored);
    });
    return d.string();
  }());
  return *dir;
}

std::string write_input(const uint8_t* data, size_t size) {
  const std::string path = work_dir() + "/input.yaml";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  return path;
}

void check_arguments(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"onceflow"};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 32; ++i) {
    if (data[i] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (!current.empty() && args.size() < 32) args.push_back(current);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  (void)onceflow::cli_check_arguments(static_cast<int>(args.size()), argv.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t reader = data[0] % 3;
  ++data;
  --size;
  switch (reader) {
    case 0: (void)onceflow::cli::load_scenario(write_input(data, size)); break;
    case 1: (void)onceflow::load_pipeline_spec(write_input(data, size)); break;
    default: check_arguments(data, size); break;
  }
  return 0;
}
