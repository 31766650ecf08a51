// Durable, atomic file-system steps of a checkpoint commit (internal to src/ckpt).
// Why each step: a rename is atomic but only durable once the parent directory is fsynced,
// and the files must be fsynced before the rename, or a crash could expose a complete-looking
// directory with missing bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::ckpt {

void fsync_path(const std::string& path);  // a file or a directory; throws naming it
// Writes `content` to `path` (created or truncated); with `sync` also fsyncs the file (not its
// directory).
void write_file(const std::string& path, const std::string& content, bool sync);
// pwrite of all `n` bytes at `off` of the open `fd` (short writes and EINTR continue); throws
// "write PATH failed: ..." naming `path`.
void pwrite_all(int fd, const void* data, size_t n, uint64_t off, const std::string& path);
// rename(from, to) + fsync of the parent directory.
void rename_durable(const std::string& from, const std::string& to);
// rename(from, to) alone (the caller fsyncs the directory); throws naming both.
void rename_or_throw(const std::string& from, const std::string& to);

// Complete checkpoints under `dir` (step-NNNNNNNN directories with a manifest.json; never
// *.tmp), oldest first, as (step, path).
std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir);
// Removes stale step-*.tmp directories and latest.tmp (left by a crash). Returns how many.
int remove_stale(const std::string& dir);
// Deletes the oldest complete checkpoints beyond `keep` (0 = keep all), never the newest.
// They are first renamed to *.tmp (one fsync of `dir` for all) so a crash mid-delete leaves no
// half checkpoint that looks complete.
void prune(const std::string& dir, int keep);

// Fault injection, an explicit seam for crash tests (no environment variable): the hook, when
// set, is called at each named point of a checkpoint write; it may throw (the exception becomes
// that write's error, raised on every rank at the next step boundary) or block (for a SIGKILL to
// land there). Set it only while no write is in flight (it is read by the writer thread).
// Points: in_shard:<i> (its in-memory image has a dataset, no byte on disk), after_shard:<i>
// (written, not yet fsynced), before_manifest, before_rename, before_latest, before_prune.
using FaultHook = std::function<void(const std::string& point)>;
void set_fault_hook(FaultHook hook);  // an empty hook (the default) disables injection
void fault_point(const std::string& point);

}  // namespace hpctrain::ckpt
