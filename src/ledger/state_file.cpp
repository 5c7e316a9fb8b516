#include "ledger/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ledger/ledger.h"
#include "ledger/mig_ledgers.h"

namespace gpumeter {

namespace {

std::string errno_text(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

std::string parse_ledger_state(std::string_view contents, nlohmann::json& doc) {
  doc = nlohmann::json::parse(contents, nullptr, false);
  if (doc.is_discarded()) return "not valid JSON";
  // Fields are compared as JSON values: json::value() throws when a field has another type,
  // and a corrupt file must be reported, not crash the agent.
  const auto format = doc.is_object() ? doc.find("format") : doc.end();
  if (!doc.is_object() || format == doc.end() || *format != kLedgerStateFormat) {
    return std::string("not a gpumeter ledger state file (no \"format\": \"") + kLedgerStateFormat + "\")";
  }
  const auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() || *version != kLedgerStateVersion) {
    return "unsupported state version " + (version == doc.end() ? std::string("null") : version->dump()) +
           " (this gpumeter reads " + std::to_string(kLedgerStateVersion) + ")";
  }
  if (!doc.contains("gpus") || !doc["gpus"].is_object()) return "no \"gpus\" object";
  return "";
}

LoadedLedgerState load_ledger_state(const std::string& path) {
  LoadedLedgerState out;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) return out;
  auto fatal = [&](std::string problem) {
    out.problem = std::move(problem);
    out.fatal = true;
    return out;
  };
  if (ec) return fatal("cannot read " + path + ": " + ec.message());
  if (status.type() != std::filesystem::file_type::regular) return fatal(path + " is not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return fatal("cannot read " + path + ": " + ec.message());
  if (size > kMaxLedgerStateBytes) {
    return fatal(path + " is larger than " + std::to_string(kMaxLedgerStateBytes >> 20) + " MiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return fatal(errno_text("cannot read", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return fatal(errno_text("cannot read", path));
  nlohmann::json doc;
  std::string problem = parse_ledger_state(ss.str(), doc);
  if (problem.empty()) {
    // Every GPU's ledger is checked now, not when the GPU appears: one that cannot be resumed
    // sets the whole file aside, where a later checkpoint cannot overwrite it.
    for (const auto& [uuid, entry] : doc["gpus"].items()) {
      if (!entry.is_object() || !entry.contains("ledger")) {
        problem = "GPU " + uuid + ": no \"ledger\"";
        break;
      }
      std::vector<std::string> dropped;
      if (auto l = GpuLedger::from_json(entry["ledger"], {}, &dropped); !l) {
        problem = "GPU " + uuid + ": " + l.error().message;
        break;
      }
      if (entry.contains("mig")) {
        if (auto m = MigLedgers::from_json(entry["mig"], {}, &dropped); !m) {
          problem = "GPU " + uuid + ": " + m.error().message;
          break;
        }
      }
      for (const auto& d : dropped) out.dropped.push_back("GPU " + uuid + ": " + d);
    }
  }
  if (problem.empty()) {
    out.document = std::move(doc);
    return out;
  }
  out.dropped.clear();
  out.problem = path + ": " + problem;
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  out.set_aside_path = path + ".corrupt-" + std::to_string(now);
  if (std::rename(path.c_str(), out.set_aside_path.c_str()) != 0) {
    out.problem += "; and it could not be set aside to " + out.set_aside_path + ": " + std::strerror(errno);
    out.set_aside_path.clear();
    out.fatal = true;
  }
  return out;
}

}  // namespace gpumeter
