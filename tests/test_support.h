#pragma once
// Helpers shared by the tests: temporary folders, files and running commands.

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

/// An expectation inside a thread that runs beside others (a rank of a multi-rank test):
/// Catch2's assertions are not thread-safe (two ranks checking at once crashed a test binary
/// with SIGSEGV in CI), so a failure throws, naming the line, and the test checks the ranks'
/// errors on its own thread.
#define NMT_RANK_CHECK(...)                                                              \
  do {                                                                                   \
    if (!(__VA_ARGS__))                                                                  \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                               ": failed: " #__VA_ARGS__);                              \
  } while (0)

namespace nmt::test {

/// A fresh folder under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("nmt-test-" + std::to_string(rd()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  /// Writes `text` to a file in this folder and returns its path.
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::filesystem::path file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

/// A TCP port that is free now (the kernel's pick for port 0), for a rendezvous in a test.
/// Commands run under /bin/sh, which is dash here: it has no $RANDOM, so a port computed as
/// $(( 20000 + RANDOM % 20000 )) was always 20000, and two tests running at once collided.
inline int free_port() {
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  if (sock < 0) throw std::runtime_error("free_port: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof addr;
  const bool ok = ::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &length) == 0;
  ::close(sock);
  if (!ok) throw std::runtime_error("free_port: bind or getsockname failed");
  return ntohs(addr.sin_port);
}

/// Output and exit status of a shell command.
struct CommandResult {
  int exit_code = -1;  ///< exit status, or 128 + signal number
  std::string out;     ///< stdout
  std::string err;     ///< stderr
};

/// Runs a shell command, capturing stdout and stderr separately.
inline CommandResult run_command(const std::string& command) {
  TempDir tmp;
  const auto err_file = tmp.path() / "stderr";
  // Grouped, so the redirection covers every command of a compound line.
  const std::string full = "{ " + command + "\n} 2>'" + err_file.string() + "'";
  CommandResult result;
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_file, std::ios::binary);
  result.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return result;
}

/// Reads a whole file ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The lines of text, without their newlines (a last line without one counts).
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Lines of text that contain `needle`.
inline int count_lines_with(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

/// Pairs of train_slice_flags(): the first 18,000 of the shipped training set, the sample that
/// was shipped before the full set.
constexpr int kTrainSlicePairs = 18000;

/// `--set` flags that make nmt-train train on the first kTrainSlicePairs pairs of the shipped
/// training set (plain files, written once per test binary). For runs that train their own
/// SentencePiece model, which takes 2-3x as long on the full 41,931 pairs.
inline const std::string& train_slice_flags() {
  static TempDir dir;
  static const std::string flags = [] {
    std::string set;
    for (const std::string side : {"en", "de"}) {
      const std::string slice = (dir.path() / ("train." + side)).string();
      const std::string shipped =
          std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.train." + side + ".gz";
      const CommandResult r = run_command("gzip -dc '" + shipped + "' | head -n " +
                                          std::to_string(kTrainSlicePairs) + " > '" + slice + "'");
      if (r.exit_code != 0) throw std::runtime_error("cannot slice " + shipped + ": " + r.err);
      set += std::string(" --set data.train_") + (side == "en" ? "src=" : "tgt=") + slice;
    }
    return set;
  }();
  return flags;
}

}  // namespace nmt::test
