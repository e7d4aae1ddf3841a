#pragma once
// What a rank accepts from the rendezvous store. The store is unauthenticated and shared by
// every rank, so a value read from it is bounded and parsed before use: one larger than its
// protocol ever writes, or one that does not parse, is an error that says so and names the
// key, never an allocation of whatever size was claimed nor a "store does not answer".
//
// Sizes are bounded twice. The store's server (LibTorch's libuv TCPStore, which rank 0 hosts;
// rendezvous.cpp insists on that backend) refuses a value over kStoreServerMaxValueBytes when
// it is sent, before allocating it, and drops that connection: no value larger is ever held,
// so no reader allocates more. Each protocol then checks what it reads against its own, much
// smaller bound (below).

#include <cstddef>
#include <cstdint>
#include <string>

namespace nmt::dist {

/// The most the store's server takes in one value (LibTorch's libuv backend, MAX_PAYLOAD_LEN).
inline constexpr size_t kStoreServerMaxValueBytes = size_t{8} << 20;
/// A rank's announcement at the rendezvous: pid, boot id, network namespace, hostname.
inline constexpr size_t kMaxAnnouncementBytes = 1024;
/// A progress mark: a count and a place in the loop.
inline constexpr size_t kMaxProgressMarkBytes = 1024;
/// One rank's string in all_gather_strings (hashes, RNG states of a few KiB, messages).
inline constexpr size_t kMaxGatherBytes = size_t{1} << 20;
/// A decimal integer (the agreed stop step).
inline constexpr size_t kMaxIntegerBytes = 32;

/// In both checks, a `rank` below 0 leaves the "rank R: " prefix out.

/// Throws DistError when `value` (read from or about to be written to `key`) is longer than
/// `limit`: "rank R: 'KEY' in the rendezvous store holds N bytes, more than the LIMIT of WHAT".
void check_value_size(int rank, const std::string& key, const std::string& value, size_t limit,
                      const char* what);

/// `value` of `key` as a decimal int64 (an optional '-' and digits, nothing else); throws
/// DistError "rank R: malformed value of 'KEY' in the rendezvous store: 'TEXT' (expected WHAT)".
int64_t parse_store_integer(int rank, const std::string& key, const std::string& value,
                            const char* what);

/// `value` cut to `n` characters with "..." and non-printable bytes as '?', for messages.
std::string printable_prefix(const std::string& value, size_t n = 60);

}  // namespace nmt::dist
