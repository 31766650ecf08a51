// Checkpoints: the public API the trainer (and users' own C++ programs) call.
//
// Layout on disk (contract, see DESIGN.md):
//   DIR/step-00000400/manifest.json              written last; its presence + the directory name
//   DIR/step-00000400/shard-00000-of-00002.h5    without ".tmp" is what makes a checkpoint complete
//   DIR/latest                                   one line: "step-00000400"
// Tensor names are "<group>/<plain dotted name>": group is model (params + buffers, no
// "module." prefix), optim (state keyed by parameter name, e.g. optim/fc.weight.exp_avg) or
// state (rng, sampler, scaler... tensors). Each becomes the HDF5 dataset of that path in its
// shard. Dtypes: float32/64, float16 (IEEE half, h5py reads '<f2'), bfloat16 (uint16 raw bits,
// attribute dtype="bfloat16"; h5py reads '<u2', view as bf16 by shifting into float32's high
// half), int32/64, uint8, bool (HDF5 enum FALSE/TRUE over int8, h5py reads numpy bool).
// Every dataset carries a string attribute "dtype" with the torch dtype name. Empty and
// 0-d tensors are stored as zero-sized / scalar dataspaces.
//
// Trainer contract:
// - CheckpointWriter is collective: construct it, call save()/check_errors()/finish() on all
//   ranks at the same step boundaries, from the thread that issues the trainer's collectives.
// - save() copies the tensors to host at call time (pinned memory for CUDA tensors; into the
//   previous snapshot's buffers when they fit), so the caller may update them right after. It
//   returns before the files are written (async). With async=false it writes from the CPU
//   tensors themselves (no copy) and returns once the checkpoint is committed.
// - save(..., Snapshot::kBeforeUpdate) (async, all tensors on the CPU) takes that copy on the
//   writer thread instead, so the step boundary does not wait for it. The caller promises not
//   to mutate any tensor it passed until before_update() has returned: the trainer calls it
//   right before the next optimizer step, and passes copies of what changes sooner (BatchNorm
//   buffers change in the next forward). Time spent waiting there counts as stall. With any
//   tensor on a GPU it is the same as kAtCall (the device copy needs the caller's stream).
// - take_completed() after check_errors()/finish(): stall, write time and bytes per checkpoint.
// - Each shard is written in one pass at disk speed with one fsync (the commit adds the
//   manifest's, latest's and two directory fsyncs); the write holds one shard file's HDF5 image
//   in memory at a time, and only its metadata unless compress is on (ckpt/h5_image.h).
// - check_errors() at every step boundary: a write error of any rank is thrown on every rank as
//   CollectiveError ("checkpoint step-00000400: rank 0: ..."), never lost. It is one small
//   allreduce while a checkpoint is in flight and free (no collective) otherwise.
// - finish() before exit: waits for the last write and raises its error on every rank.
// - With all_writers=false (default) only rank 0's tensors are written: pass the same state on
//   every rank (other ranks' tensors are ignored and may be empty). With all_writers=true every
//   rank must pass identical tensor names/shapes/values (replicated DP state): shard i is written
//   by rank i % world_size from its own copy, rank 0 builds the manifest from its copy, so a
//   rank whose copy differed shows up as a checksum failure on verify. DIR must be shared.
// The ckpt/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/named_tensors.h"

namespace torch::nn {
class Module;
}

namespace hpctrain {

class Communicator;

// What a checkpoint holds.
struct CheckpointState {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // full names, see above
  // Trainer metadata: at least "epoch"; also config, sampler position, scaler, scheduler...
  // Stored verbatim under manifest["meta"]. The writer adds step, world size, versions.
  nlohmann::json meta = nlohmann::json::object();
};

// What one checkpoint cost, as this rank saw it (rank 0 writes in every mode, so its numbers
// are the ones to report).
struct CheckpointStats {
  int64_t step = 0;
  // Time save() held the caller: waiting for the previous write (at most one in flight), the
  // manifest plan, the host snapshot and the error agreement; with async=false also the whole
  // write. This is what the training loop loses to the checkpoint.
  double stall_s = 0;
  // The write itself, in the background with async=true: checksums, shard files + fsync, and
  // the commit (manifest, renames, latest, prune). 0 on ranks that write nothing.
  double write_s = 0;
  int64_t bytes = 0;  // sum of the manifest's tensor sizes (the checkpoint's payload)
  bool async = true;
};

// When save() copies the tensors it is given (see the contract above).
enum class Snapshot { kAtCall, kBeforeUpdate };

struct CheckpointOptions {
  std::string dir;
  int64_t shard_mb = 512;    // shard size cap; a tensor larger than the cap gets its own shard
  int keep = 0;              // keep the newest K complete checkpoints; 0 keeps all
  bool async = true;         // write in a background thread
  bool compress = false;     // gzip (level 4) chunked datasets
  bool all_writers = false;  // spread shards over ranks (shared filesystem required)
};

// Asynchronous, atomic, error-agreeing checkpoint writer. See the contract above.
class CheckpointWriter {
 public:
  // Collective. Rank 0 removes stale *.tmp directories and latest.tmp in opts.dir.
  // `comm` must carry CPU tensors (the MPI communicator, or a DeviceRouter).
  CheckpointWriter(CheckpointOptions opts, Communicator& comm);
  // Waits for a write in flight (errors are then only printed: call finish() to see them).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Collective. Waits for the previous write (at most one in flight), raises its error on all
  // ranks, snapshots `state` to host and starts writing DIR/step-<step>. With async=false it
  // returns after the checkpoint is committed.
  void save(int64_t step, CheckpointState state, Snapshot when = Snapshot::kAtCall);
  // Local. Returns once the snapshot of a kBeforeUpdate save in flight is taken (at once if
  // there is none); the seconds it waited are added to that checkpoint's stall and returned.
  double before_update();
  // Collective, cheap (one allreduce of two int64). Throws CollectiveError on every rank if
  // any rank's write failed; in all_writers mode also commits once every shard is written.
  void check_errors();
  // check_errors() in two halves, for a caller that carries the vote in an allreduce of its own
  // (the trainer's one step-boundary agreement, train/step_boundary.h): boundary_vote() is
  // local (this rank's error flag and pending count, 0 and 0 with no write in flight);
  // settle_boundary() gets every rank's sums of them and is then collective like check_errors().
  struct BoundaryVote {
    int64_t error = 0, pending = 0;
  };
  BoundaryVote boundary_vote();
  void settle_boundary(int64_t errors, int64_t pending);
  // Collective. Waits for the write in flight, commits it and raises any error on all ranks.
  void finish();

  const CheckpointOptions& options() const { return opts_; }

  // Local (no collective): the stats of the checkpoints committed since the last call, oldest
  // first. A checkpoint whose write failed has none (its error is raised instead).
  std::vector<CheckpointStats> take_completed();

 private:
  struct Job;
  void wait_local();
  struct Vote {
    std::string error, context;
    int64_t pending = 0;
  };
  Vote local_vote();
  // After an agreement's allreduce: raises the errors, commits (all_writers); true: agree again.
  bool settle(const Vote& mine, int64_t errors, int64_t all_pending, bool wait_all, bool* agreed_clean);
  void agree(bool wait_all);
  void finish_agreement(bool agreed_clean);
  void run_job(Job& job);
  void retire_job();

  CheckpointOptions opts_;
  Communicator& comm_;
  std::unique_ptr<Job> job_;
  std::thread thread_;
  std::vector<CheckpointStats> completed_;
  Vote boundary_vote_;  // boundary_vote()'s view, for settle_boundary()
  // Host buffers of the last committed async snapshot, recycled by the next save() (host
  // memory of one snapshot stays allocated between checkpoints).
  std::vector<std::pair<std::string, at::Tensor>> spare_;
};

// Resume decision. mode: "none" -> nullopt; "auto" -> the newest complete checkpoint under
// `dir` whose checksums verify (a failing one is reported on stderr and the previous one is
// tried; nullopt if none); anything else is a path (a step directory, a checkpoint root whose
// `latest` is followed, or ROOT/latest) that must verify, else hpctrain::Error.
// Reads files only (no collective); all ranks get the same answer from the same files.
std::optional<std::string> find_resume(const std::string& dir, const std::string& mode);

// Reads and verifies a checkpoint and maps every tensor to `device`: a step directory, root or
// ROOT/latest (whole-file checksum of each shard, then each tensor's), or a merged .h5, .pt/.pth
// or .safetensors from `ckpt merge` (each tensor against the checksum its metadata lists; a
// .pt or .safetensors from elsewhere is read unchecked, with empty meta), or a Hugging Face GPT-2
// directory (config.json + model.safetensors; read as a `--model gpt` checkpoint with the meta
// eval and generate need, ckpt/formats/hf_gpt2.h). Throws hpctrain::Error
// naming the file and tensor on any failure; its message never carries raw bytes from a file.
CheckpointState read_checkpoint(const std::string& path, c10::Device device);

// Loads the `model/` tensors of a checkpoint (any read_checkpoint path) into `model`'s parameters
// and buffers (matched by plain dotted name). A mismatch throws hpctrain::Error listing missing
// keys, unexpected keys and shape mismatches ("fc.weight: saved [10,256] vs model [10,128]").
// Tied weights (one tensor under several names in `model`): the state needs one of the names;
// every other name it has must hold the same values (else an Error naming both).
void load_model(const std::string& path, torch::nn::Module& model, c10::Device device);
// The same check and copy for a state already read; `source` names it in the error.
void load_model_state(const CheckpointState& st, torch::nn::Module& model, const std::string& source);
// The same for a model given as every name of its state (model/model.h state_dict_names).
void load_model_state(const CheckpointState& st, const NamedTensors& target, const std::string& source);

}  // namespace hpctrain
