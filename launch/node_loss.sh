# Sourced by launch/local.sh (with --hostfile) and slurm/train.sbatch (mpirun launcher): make
# Open MPI notice a host that drops off the network, so that the whole job ends.
#
# Why: mpirun and its daemons (orted) talk over TCP. A host whose link goes down sends no FIN or
# RST, so nothing tells mpirun; Open MPI only learns of it through TCP keepalive on the daemon
# connections, by default after 300 s idle + 9 probes x 20 s = 8 min. Worse, once mpirun has
# queued a message to the lost daemon (e.g. the kill order after a rank's MPI_Abort), the kernel
# stops keepalive probes on that socket and retransmits for ~15 min instead: mpirun, and the
# lost host's orted, stay alive long after every rank has gone (measured: 100+ s, then killed).
# With 10 s idle + 3 probes x 5 s, mpirun reports "ORTE has lost communication with a remote
# daemon" and ends every process of the job within 25 s of the link going down (measured on the
# namespace cluster, tests/cluster/test_cluster_faults.sh), which is before hpctrain's watchdog
# (--collective-timeout, default 300 s) fires. Keep --collective-timeout above 25 s on multi-host
# runs; launch/local.sh also ends an mpirun that outlives its local ranks (see there).
# A value the user exported (OMPI_MCA_oob_tcp_keepalive_*) wins; OMPI_MCA_* reach every orted.
export OMPI_MCA_oob_tcp_keepalive_time=${OMPI_MCA_oob_tcp_keepalive_time:-10}
export OMPI_MCA_oob_tcp_keepalive_intvl=${OMPI_MCA_oob_tcp_keepalive_intvl:-5}
export OMPI_MCA_oob_tcp_keepalive_probes=${OMPI_MCA_oob_tcp_keepalive_probes:-3}
