#pragma once
// SIGINT and SIGTERM ask a running loop to stop after the current update (it then writes a
// checkpoint and exits cleanly); a second signal ends the process at once.

namespace nmt::train {

/// Installs the SIGINT/SIGTERM handlers.
void install_stop_handlers();
/// True once a stop was requested.
bool stop_requested();

}  // namespace nmt::train
