// Exit codes of every hpctrain program, and which of them a restart can cure. The launchers
// (launch/restart_lib.sh, slurm/train.sbatch) restart a job only for the curable ones; a
// deterministic failure (bad input, out of memory, divergence, an error in user code) would
// fail again the same way, so it ends the job at once.
#pragma once

namespace hpctrain {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,        // an error on one rank that a restart does not cure (a bug, a model that throws)
  kExitBadInput = 2,      // bad flags, config, data or checkpoint: at start-up or found mid-run
  kExitHang = 3,          // the watchdog: a collective did not complete (a dead or hung peer) -- curable
  kExitOutOfMemory = 4,   // host or device memory exhausted: the same run needs the same memory
  kExitDiverged = 5,      // a non-finite loss or gradient norm
  kExitCommFailed = 6,    // MPI or NCCL reported an error (a peer or the network went away) -- curable
  kExitPreempted = 75,    // stopped by a signal after a checkpoint (EX_TEMPFAIL): the scheduler requeues
};

}  // namespace hpctrain
