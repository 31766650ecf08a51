// The watchdog's hang note: one process-wide string behind a mutex.
#include "comm/guard/hang_note.h"

#include <mutex>

namespace hpctrain {
namespace {
std::mutex& note_mu() {
  static std::mutex mu;
  return mu;
}
std::string& note() {
  static std::string n;
  return n;
}
}  // namespace

void set_hang_note(std::string n) {
  std::lock_guard<std::mutex> lk(note_mu());
  note() = std::move(n);
}

std::string hang_note() {
  std::lock_guard<std::mutex> lk(note_mu());
  return note();
}

}  // namespace hpctrain
