// Preemption: SIGUSR1/SIGTERM only set a flag (checkpointing inside a handler is unsafe); the
// trainer reads it at step boundaries and agrees on it across ranks (allreduce max), so a rank
// that got no signal still joins the final checkpoint.
#pragma once

namespace hpctrain {

// Installs the handlers (idempotent).
void install_preemption_handlers();
// The signal number received (0 if none).
int preemption_signal();
// Exit code of a run that stopped for preemption after checkpointing (documented in README).
constexpr int kPreemptedExitCode = 75;  // EX_TEMPFAIL: "try again later"

}  // namespace hpctrain
