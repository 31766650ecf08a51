// TrainConfig: every setting of `hpctrain train`, from defaults, the environment, a TOML file
// and command-line flags.
//
// Contract:
// - One list (HPCTRAIN_CONFIG_FIELDS below) declares every field once: its C++ type, name,
//   default, help label, allowed values, range and help text. The struct members, the TOML keys
//   (snake_case), the flags (--kebab-case), to_json/from_json and `--help` are all generated
//   from it, so none can drift from another.
// - Precedence, lowest to highest: defaults < environment (HPCTRAIN_COLLECTIVE_TIMEOUT,
//   HPCTRAIN_DEBUG_COLLECTIVES) < the TOML file < flags. A value given at a higher level wins
//   even when it equals the default.
// - Unknown keys, wrong types, out-of-range values and option pairings that cannot work
//   (check_pairings) are CollectiveErrors naming the key and the allowed values; they are raised
//   in load_config, before any rank touches data or devices, and every rank reaches the same
//   verdict (same inputs).
// - to_json() is the effective configuration, printed by rank 0 and stored with every
//   checkpoint and metrics file; from_json(to_json()) gives the same config back.
// Where this sits in the whole: docs/architecture.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/comm_settings.h"
#include "optim/optim_config.h"

namespace hpctrain {

inline constexpr double kNoMin = -1e300, kNoMax = 1e300;

// clang-format off
// X(type, name, default, label, choices, min, max, min_exclusive, help)
//   label:   what --help shows as the value ("" : INT, FLOAT, BOOL, TEXT by type, or the choices)
//   choices: "a|b|c" for a fixed set of strings ("" : free text)
//   min/max: inclusive range of a number (min exclusive when min_exclusive)
#define HPCTRAIN_CONFIG_FIELDS(X) \
  X(std::string, model, "cnn", "NAME|FILE.pt", "", kNoMin, kNoMax, false, "model: mlp|cnn|resnet|gpt, a plugin's model (hpctrain models lists them), or a TorchScript file") \
  X(std::vector<std::string>, model_lib, {}, "PATH", "", kNoMin, kNoMax, false, "model plugin LIB.so to load (repeatable, or comma-separated)") \
  X(std::string, model_config, "", "K=V,...", "", kNoMin, kNoMax, false, "model options, e.g. n_layer=4,n_head=4,n_embd=128 for gpt (also dropout, bias)") \
  X(int64_t, seq_len, 0, "", "", 0, 1e9, false, "token data: tokens per training window, the language model's context (required for token data)") \
  X(int64_t, vocab_size, 0, "", "", 0, 2147483647, false, "nanoGPT data (DIR/train.bin, DIR/val.bin: uint16 ids): the number of token ids, when DIR/meta.pkl gives no vocab_size (0: from meta.pkl)") \
  X(std::string, loss, "cross_entropy", "", "cross_entropy|mse|l1|smooth_l1", kNoMin, kNoMax, false, "training loss: cross_entropy (integer labels) | mse | l1 | smooth_l1 (float targets)") \
  X(std::string, targets_key, "targets", "NAME", "", kNoMin, kNoMax, false, "dataset of float targets for regression losses") \
  X(std::string, data, "", "DIR", "", kNoMin, kNoMax, false, "directory with train.h5 and test.h5, or numbered train-00000.h5... and test-00000.h5..., or nanoGPT's train.bin and val.bin (required)") \
  X(int64_t, epochs, 1, "", "", 1, 1e9, false, "epochs to train") \
  X(int64_t, max_steps, 0, "", "", 0, 1e12, false, "stop after this many optimizer steps (0: no limit)") \
  X(int64_t, batch_size, 64, "", "", 1, 1e9, false, "per-rank batch size") \
  X(double, lr, 0.05, "", "", 0, 1e6, true, "learning rate") \
  X(std::string, optimizer, "sgd", "", "sgd|adamw", kNoMin, kNoMax, false, "optimizer") \
  X(double, momentum, 0.9, "", "", 0, 1, false, "SGD momentum") \
  X(bool, nesterov, false, "", "", kNoMin, kNoMax, false, "Nesterov momentum (SGD)") \
  X(double, weight_decay, 5e-4, "", "", 0, 1e6, false, "weight decay") \
  X(std::string, schedule, "cosine", "", "constant|cosine|step|wsd", kNoMin, kNoMax, false, "LR schedule after warmup (wsd: warmup-stable-decay, linear decay over the last --decay-frac of the steps)") \
  X(int64_t, warmup_steps, 0, "", "", 0, 1e12, false, "linear warmup steps") \
  X(int64_t, step_size, 1000, "", "", 1, 1e12, false, "steps between decays (schedule=step)") \
  X(double, gamma, 0.1, "", "", 0, 1, true, "decay factor (schedule=step)") \
  X(double, decay_frac, 0.2, "", "", 0, 1, true, "schedule=wsd: the fraction of all steps, at the end, over which the lr falls linearly to --min-lr") \
  X(double, min_lr, 0, "", "", 0, 1e6, false, "the lr that schedule=cosine and schedule=wsd end at") \
  X(int64_t, lr_ref_batch, 0, "", "", 0, 1e12, false, "linear scaling rule: lr x global batch / this (0: off)") \
  X(double, clip_grad_norm, 0, "", "", 0, 1e12, false, "clip gradients to this global norm (0: off)") \
  X(int64_t, grad_accum, 1, "", "", 1, 1e6, false, "micro-batches per optimizer step (must divide --batch-size)") \
  X(int64_t, zero, 0, "", "", 0, 3, false, "ZeRO stage: 0 = DDP (replicated), 1 = optimizer state sharded over ranks, 2 = gradients sharded too, 3 = parameters too, each unit (gpt: a transformer block) gathered around its forward and backward, CPU ranks (docs/zero.md; hpctrain plan sizes each stage)") \
  X(bool, activation_checkpointing, false, "", "", kNoMin, kNoMax, false, "keep only each unit's input (gpt: each transformer block) in forward and recompute the unit in backward: less activation memory, one more forward of the units per step") \
  X(std::string, device, "auto", "auto|cpu|cuda|cuda:N", "", kNoMin, kNoMax, false, "device of every rank (auto: the local rank's GPU if any, else cpu)") \
  X(bool, sync_bn, false, "", "", kNoMin, kNoMax, false, "convert BatchNorm to SyncBatchNorm (not for TorchScript models)") \
  X(std::string, amp, "off", "", "off|bf16|fp16", kNoMin, kNoMax, false, "mixed precision") \
  X(double, bucket_mb, 25, "", "", 0, 1e6, true, "DDP bucket cap in MiB") \
  X(std::string, grad_comm_dtype, "fp32", "", "fp32|bf16|fp16", kNoMin, kNoMax, false, "dtype gradients are reduced in: bf16/fp16 halve the bytes on the network (cast per bucket, summed in fp32 per combine, as PyTorch's bf16_compress_hook)") \
  X(std::string, allreduce, "auto", "", "auto|flat|hierarchical", kNoMin, kNoMax, false, "CPU allreduce across hosts: hierarchical (in-host shared memory, then one rank per host and part across hosts), flat, or auto (hierarchical when several hosts have several ranks on some; hpctrain doctor shows the choice)") \
  X(int64_t, prefetch, 2, "", "", 0, 1024, false, "batches prefetched by the loader thread") \
  X(std::string, validate_tokens, "full", "", "full|lazy", kNoMin, kNoMax, false, "token data: check every token id at start-up (full; a file over --data-in-memory-mb is streamed once) or only as batches read them (lazy: a bad id then ends the run mid-way, exit code 2)") \
  X(int64_t, data_in_memory_mb, 512, "", "", 0, 1 << 20, false, "read a data file whole into memory at its first batch when it is at most this many MiB (512 in all per process; 0: read every batch from the file)") \
  X(bool, augment, false, "", "", kNoMin, kNoMax, false, "random crop + flip augmentation") \
  X(std::string, ckpt_dir, "", "DIR", "", kNoMin, kNoMax, false, "checkpoint directory (empty: no checkpoints)") \
  X(int64_t, ckpt_every, 0, "", "", 0, 1e12, false, "checkpoint every N steps (0: only at the end)") \
  X(int64_t, ckpt_keep, 0, "", "", 0, 1e9, false, "keep the newest K checkpoints (0: all)") \
  X(int64_t, ckpt_shard_mb, 512, "", "", 1, 1e9, false, "max shard size in MiB") \
  X(bool, ckpt_async, true, "", "", kNoMin, kNoMax, false, "write checkpoints in the background") \
  X(bool, ckpt_compress, false, "", "", kNoMin, kNoMax, false, "gzip-compress checkpoint shards") \
  X(std::string, ckpt_writers, "rank0", "", "rank0|all", kNoMin, kNoMax, false, "which ranks write checkpoint shards") \
  X(int64_t, snapshot_every, 0, "", "", 0, 1e12, false, "copy the training state into host memory (--snapshot-dir) every N steps, for --resume auto after a failure (0: off)") \
  X(int64_t, snapshot_nice, 19, "", "", 0, 19, false, "CPU priority (nice value, per thread) of the snapshot writer and copy threads: 19 uses idle CPU time only (more snapshots skipped while training keeps every core busy), 0 competes with training") \
  X(std::string, snapshot_dir, "", "DIR", "", kNoMin, kNoMax, false, "a directory in memory (tmpfs/ramfs) that holds the snapshots, in a subdirectory per job and config (default /dev/shm)") \
  X(std::string, resume, "auto", "auto|none|PATH", "", kNoMin, kNoMax, false, "auto: the newest complete checkpoint in --ckpt-dir, if any (a reused directory resumes); none: start fresh; PATH: that checkpoint") \
  X(std::string, init_from, "", "PATH", "", kNoMin, kNoMax, false, "start from these weights (fine-tuning: optimizer, step and sampler start fresh): a merged .h5/.pt/.safetensors of the same model, or a Hugging Face GPT-2 directory for --model gpt (its config.json supplies --model-config when none is given, else must match it); a checkpoint --resume finds wins") \
  X(int64_t, seed, 0, "", "", 0, 9.2e18, false, "seed for every generator") \
  X(std::string, metrics, "", "FILE", "", kNoMin, kNoMax, false, "write JSON lines metrics to this file") \
  X(std::string, trace, "", "FILE", "", kNoMin, kNoMax, false, "write a Chrome-trace timeline to this file") \
  X(std::string, tensorboard, "", "DIR", "", kNoMin, kNoMax, false, "write TensorBoard event files to this directory (rank 0)") \
  X(double, peak_tflops, 0, "", "", 0, 1e9, false, "peak TFLOP/s of one rank's device, the denominator of MFU (token data); 0: measured on CPU by a short GEMM at start, MFU off on GPUs") \
  X(int64_t, log_every, 50, "", "", 1, 1e12, false, "progress/metrics interval in steps") \
  X(double, collective_timeout, 300, "", "", 0, 1e9, false, "seconds before a stuck collective aborts the job (0: no watchdog; env HPCTRAIN_COLLECTIVE_TIMEOUT)") \
  X(int64_t, flight_records, 2048, "", "", 0, 1e7, false, "collectives each rank keeps in its flight recorder, dumped to <ckpt dir, else the metrics file's dir, else .>/flight/ on a watchdog timeout, desync, fatal error or SIGUSR2; read with hpctrain flight DIR (0: off)") \
  X(bool, debug_collectives, false, "", "", kNoMin, kNoMax, false, "compare collective fingerprints across ranks (env HPCTRAIN_DEBUG_COLLECTIVES)") \
  X(double, straggler_threshold, 0.05, "", "", 0, 1, false, "name a rank that costs the job more than this share of the step time (0: off)")
// clang-format on

struct TrainConfig {
#define HPCTRAIN_DECLARE_FIELD(type, name, def, ...) type name = def;
  HPCTRAIN_CONFIG_FIELDS(HPCTRAIN_DECLARE_FIELD)
#undef HPCTRAIN_DECLARE_FIELD

  bool operator==(const TrainConfig&) const = default;
  nlohmann::json to_json() const;
  // Fields absent from `j` keep their defaults; a key that is no field, or a value of the wrong
  // type, throws CollectiveError naming it.
  static TrainConfig from_json(const nlohmann::json& j);
};

// kStringList: a TOML array of strings (or one string); a flag that may be repeated, each value
// also split at commas.
enum class FieldKind { kInt, kFloat, kBool, kString, kStringList };

struct FieldSpec {
  std::string key;  // snake_case TOML key; the flag is --key with '_' -> '-'
  FieldKind kind;
  std::string help;
  std::vector<std::string> choices;   // for strings with a fixed set (empty: free text)
  double min = kNoMin, max = kNoMax;  // inclusive range for numbers
  bool min_exclusive = false;
  std::string label;         // the value's name in --help: INT, FLOAT, BOOL, TEXT, PATH, {a,b}...
  std::string default_text;  // the default as --help shows it
};

const std::vector<FieldSpec>& config_fields();

// The flag of a key: "batch_size" -> "--batch-size".
std::string flag_of(const std::string& key);

// Builds the configuration: defaults, then the environment, then the TOML file (if non-empty),
// then `flags` (key -> raw string from the command line), then check_pairings. Throws
// CollectiveError on any problem.
TrainConfig load_config(const std::string& toml_path, const std::map<std::string, std::string>& flags);

// Option pairings that cannot work, each a CollectiveError naming both options: no --data,
// --grad-accum not dividing --batch-size, --zero 3, --zero 1/2 with an optimizer without a
// sharded implementation, --sync-bn with a TorchScript model.
void check_pairings(const TrainConfig& c);

// The communicators' settings of a run: the config's collective_timeout and debug_collectives
// (which already carry the environment's values, at their precedence).
CommSettings comm_settings(const TrainConfig& c);

// The optimizer stage's settings of a run (optim/optim_config.h): the fields of the same names.
OptimConfig optim_config(const TrainConfig& c);

}  // namespace hpctrain
