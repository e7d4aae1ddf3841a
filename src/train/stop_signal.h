#pragma once
// SIGINT and SIGTERM ask a running loop to stop after the current update (it then writes a
// checkpoint and exits cleanly); a second signal ends the process at once, if it comes more
// than kRepeatedStopSignalSeconds after the first: closer, it is the same stop delivered twice
// (GNU timeout signals the child and then its process group; Ctrl-C reaches every process of
// the terminal's group, and the launcher forwards it as well). With several
// ranks, a signal that reaches any of them stops them all after the same update: they agree
// on it through the job's store (agreed_stop).

#include <cstdint>
#include <optional>

namespace nmt::dist {
class KeyValueStore;
}

namespace nmt::train {

/// A SIGINT/SIGTERM within this many seconds of the first asks for the same stop; a later one
/// ends the process the default way.
constexpr double kRepeatedStopSignalSeconds = 1.0;

/// Installs the SIGINT/SIGTERM handlers.
void install_stop_handlers();
/// True once a stop was requested.
bool stop_requested();

/// Agreement on a graceful stop, at one store round trip per call: call it before every
/// update with the updates done so far, and `requested` when this rank saw a stop signal.
/// The first rank that asks fixes the stop after its next update (updates_done + 1; every
/// other rank is at most one update away, since each update ends in an all-reduce). Returns
/// the update after which every rank stops, once any rank has asked; nullopt before. A value
/// of the key that is no integer is a DistError saying it is malformed.
std::optional<int64_t> agreed_stop(dist::KeyValueStore& store, int64_t updates_done,
                                   bool requested);

}  // namespace nmt::train
