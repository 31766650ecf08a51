#include "train/preempt.h"

#include <csignal>

namespace hpctrain {
namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_preempt_signal(int sig) { g_signal = sig; }
}  // namespace

void install_preemption_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_preempt_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int preemption_signal() { return g_signal; }

}  // namespace hpctrain
