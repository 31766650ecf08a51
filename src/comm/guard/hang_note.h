// A line of context the watchdog prints after its timeout report (e.g. the trainer's last
// interval per-rank split: who was already slow before the hang).
//
// Contract: process-wide; set_hang_note() replaces the note (thread-safe, cheap enough for once
// per log interval); hang_note() returns it ("" when none). The watchdog prints
// "hpctrain: rank R: <note>" on stderr right after its one report line.
#pragma once

#include <string>

namespace hpctrain {

void set_hang_note(std::string note);
std::string hang_note();

}  // namespace hpctrain
