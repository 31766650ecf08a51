// `hpctrain flight DIR`: the flight recorder's dumps of one job (comm/flight_recorder.h) merged
// into a report for a person.
//
// Contract:
// - DIR is the directory holding flight/rank-<r>.json (a checkpoint or run directory) or that
//   flight/ directory itself. No dumps, unreadable dumps, or dumps of two different jobs are a
//   CollectiveError naming the files.
// - The report (one line each): the job and which ranks' dumps exist (a missing rank is named:
//   its host is gone or its process was stopped); per rank the last sequence number it finished;
//   the op the job is stuck in (the first one not every rank finished), which ranks entered it
//   and which never did; the first sequence number at which ranks disagree on op, elements or
//   dtype, if any; and per rank how long it has been stuck (in its unfinished op, or waiting
//   since its last op ended) when it dumped.
// - States are taken as of the first dump: an op that a rank finished after the first rank
//   dumped (a stopped rank continued by the job's abort finishes the op, then dumps) counts as
//   in progress.
#pragma once

#include <string>

namespace hpctrain {

std::string flight_report(const std::string& dir);

}  // namespace hpctrain
