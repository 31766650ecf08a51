// `hpctrain flight DIR`: the flight recorder's dumps of one job (comm/guard/flight_recorder.h) merged
// into a report for a person.
//
// Contract:
// - DIR is a checkpoint or run directory (with flight/), its flight/ directory, or one job's
//   directory of rank-<r>.json files. Each job (each attempt of a run: a launcher's restart or
//   shrink is a new job) dumps into flight/<job id>/; the report is of the newest job (by its
//   start time), or of `job` (a job id or directory name) when given, and names the other jobs
//   found. No dumps, an unknown `job`, unreadable dumps, or dumps of two different jobs in one
//   directory are a CollectiveError naming the files.
// - The report (one line each): the job (and its restart number, if any) and which ranks' dumps
//   exist; the other jobs in DIR, if any, newest first (a missing rank is named:
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

std::string flight_report(const std::string& dir, const std::string& job = "");

}  // namespace hpctrain
