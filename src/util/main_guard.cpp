#include "util/main_guard.h"

#include <csignal>
#include <cstdio>
#include <exception>
#include <string>

#include "util/error.h"
#include "util/log.h"

namespace nmt {
namespace {

void report(std::string_view program, std::string_view kind, std::string_view message,
            const SourceLocation* where) {
  std::string rank = log::world_size() > 1 ? fmt::format(" (rank {})", log::rank()) : "";
  std::string line = fmt::format("{}: {}{}: {}\n", program, kind, rank, message);
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  if (where && where->file && log::enabled(log::Level::kDebug)) {
    std::fprintf(stderr, "%.*s: (raised at %s:%d)\n", static_cast<int>(program.size()),
                 program.data(), where->file, where->line);
  }
  std::fflush(stderr);
}

}  // namespace

int run_main(std::string_view program, const std::function<int()>& body) {
  // A write past the file-size limit (ulimit -f) would kill the process with SIGXFSZ; ignored,
  // it fails with EFBIG instead, which the writer reports, and what was saved before stays.
  std::signal(SIGXFSZ, SIG_IGN);
  int code = 1;
  try {
    code = body();
  } catch (const Error& e) {
    report(program, "error", e.what(), &e.where());
  } catch (const std::exception& e) {
    // Not one of ours: a bug or a library failure we did not wrap. Say so plainly, without
    // the stack dump LibTorch appends to its messages.
    std::string_view message = e.what();
    const size_t backtrace = message.find("\nException raised from ");
    if (backtrace != std::string_view::npos) message = message.substr(0, backtrace);
    report(program, "internal error", message, nullptr);
  }
  log::shutdown();
  return code;
}

}  // namespace nmt
