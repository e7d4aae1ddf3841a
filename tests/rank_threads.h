#pragma once
// Ranks as threads of one test process (each builds its own Communicator or calls a protocol
// over a shared store), and what the tests check about sockets: shared by the tests of dist/
// and of the protocols that job/ runs between ranks.

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace nmt::test {

/// Runs body(rank) for each rank in its own thread; returns each rank's exception (or null).
/// A rank still running after `limit` fails the test (its thread is left behind).
inline std::vector<std::exception_ptr> run_ranks(
    int world, const std::function<void(int)>& body,
    std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<std::future<void>> done;
  for (int r = 0; r < world; ++r) {
    auto task = std::make_shared<std::packaged_task<void()>>([body, r] { body(r); });
    done.push_back(task->get_future());
    std::thread([task] { (*task)(); }).detach();
  }
  std::vector<std::exception_ptr> errors(world);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int r = 0; r < world; ++r) {
    if (done[r].wait_until(deadline) != std::future_status::ready) {
      FAIL("rank " << r << " still running after " << limit.count() << " s");
    }
    try {
      done[r].get();
    } catch (...) {
      errors[r] = std::current_exception();
    }
  }
  return errors;
}

/// The message of an exception, "" for none.
inline std::string message(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "?";
}

/// Fails the test, naming the rank and its message, when any rank threw.
inline void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(message(errors[r]) == "");
  }
}

/// The local addresses of the TCP sockets listening on `port`, from /proc/net/tcp and tcp6
/// (hex as the kernel writes them: "0100007F" is 127.0.0.1, "00000000" every interface).
inline std::vector<std::string> listening_addresses(int port) {
  std::vector<std::string> out;
  char wanted[8];
  std::snprintf(wanted, sizeof wanted, "%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.find(':');
      if (state == "0A" && colon != std::string::npos && local.substr(colon + 1) == wanted)
        out.push_back(local.substr(0, colon));
    }
  }
  return out;
}

}  // namespace nmt::test
