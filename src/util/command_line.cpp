#include "util/command_line.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

namespace gpumeter {

namespace {

// `--flag=` with nothing after the `=` (how the man page writes `--ledger.state-file=""` once the
// shell has removed the quotes) is an empty value; CLI11 reads it as a missing one. Splitting it
// into `--flag ""` gives every flag the same meaning in both forms.
std::vector<std::string> normalized_arguments(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
      args.push_back(a.substr(0, a.size() - 1));
      args.emplace_back();
    } else {
      args.push_back(std::move(a));
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11's parse(vector) takes the arguments last first
  return args;
}

// CLI11 answers a word that names no command with "A subcommand is required"; the reader needs
// to hear which word it did not know, and what it knows. False when no such word was given.
bool report_unknown_command(const CLI::App& app, std::ostream& err) {
  const CLI::App* command = &app;
  while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
  std::string word;
  for (const std::string& arg : app.remaining(true)) {
    if (!arg.empty() && arg.front() != '-') {
      word = arg;
      break;
    }
  }
  if (word.empty() || command->get_subcommands({}).empty()) return false;
  std::string path = command->get_name();
  for (const CLI::App* p = command->get_parent(); p != nullptr; p = p->get_parent()) path = p->get_name() + " " + path;
  std::string known;
  for (const CLI::App* sub : command->get_subcommands({})) known += (known.empty() ? "" : ", ") + sub->get_name();
  err << path << ": unknown command '" << word << "' (one of " << known << ")\n"
      << "Run with --help for more information.\n";
  return true;
}

}  // namespace

int run_command_line(CLI::App& app, int argc, char** argv, const int& exit_code) {
  try {
    auto args = normalized_arguments(argc, argv);
    app.parse(args);
  } catch (const CLI::RequiredError& e) {
    if (report_unknown_command(app, std::cerr)) return 2;
    return app.exit(e) != 0 ? 2 : 0;
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // Every command documents exit code 2 for a bad flag (CLI11's own codes, such as 105 for a
    // file that does not exist, mean nothing to a caller); --help and --version exit 0.
    return code != 0 ? 2 : code;
  }
  return exit_code;
}

}  // namespace gpumeter
