// Trainer::State::throw_diverged: a step whose reduced gradient norm is not finite ends the run
// (exit 5, runtime/exit_codes.h) with one line naming the step, the first parameter whose
// gradient holds inf/NaN, and the newest checkpoint (a write in flight is finished first: it
// holds an earlier, finite state). Nothing of the step was applied
// (TrainOptimizer::step returned before updating) and no checkpoint of it is written. Every
// rank reaches the verdict from the same reduced norm, so every rank throws the same
// DivergedError and rank 0 alone prints it (runtime/guard.h).
#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "ckpt/dir_ops.h"
#include "runtime/check.h"
#include "train/trainer_state_impl.h"

namespace hpctrain {

void Trainer::State::throw_diverged(const StepOutcome& outcome, const at::Tensor& step_loss) {
  const std::string first = opt->first_nonfinite_grad();  // collective: before anything can differ
  const double loss = step_loss.defined() ? step_loss.item<double>() : std::nan("");
  char head[200];
  std::snprintf(head, sizeof head, "training diverged at step %lld: the gradient norm is %g (rank 0's loss %g)",
                static_cast<long long>(step + 1), outcome.grad_norm, loss);
  std::string msg = head;
  msg += first.empty() ? "" : "; first non-finite gradient: " + first;
  if (cfg.grad_comm_dtype == "fp16" && cfg.amp != "fp16")
    msg += "; --grad-comm-dtype fp16 without --amp fp16 has no loss scaler, so a gradient above 65504 "
           "overflows the reduction: use --grad-comm-dtype bf16, or --amp fp16";
  // A checkpoint in flight holds an earlier, finite state: let it complete (collective, like
  // the verdict), so that the line names the newest checkpoint there will be.
  std::string flight_error;
  try {
    ckpt->finish();
  } catch (const std::exception& e) {
    flight_error = std::string("; the checkpoint in flight failed: ") + e.what();
  }
  std::string newest;
  if (!cfg.ckpt_dir.empty()) {
    auto done = ckpt::complete_checkpoints(cfg.ckpt_dir);
    if (!done.empty()) newest = done.back().second;
  }
  msg += "; this step was not applied, " +
         (newest.empty() ? std::string("no checkpoint was written")
                         : "the newest checkpoint " + newest + " is untouched (--resume auto continues from it)") +
         flight_error + "; lower --lr, warm up longer (--warmup-steps) or clip (--clip-grad-norm)";
  throw DivergedError(msg);
}

}  // namespace hpctrain
