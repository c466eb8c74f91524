/* cli_mpi.h: distributed tuning over MPI for the command line (cli_mpi.c,
 * docs/distributed.md). A build without MPI has the same functions: one process, rank 0. */
#ifndef FT_CLI_MPI_H
#define FT_CLI_MPI_H

#include <math.h>
#include <stddef.h>

#include "tuner/tune.h"

/* Join the job when started by a launcher (mpirun, srun): MPI_Init, this node's share of the
 * CPUs and its GPU. Returns 1 when distributed (then call ft_cli_mpi_end before exiting). */
int ft_cli_mpi_start(int *argc, char ***argv);
/* How many ranks the launcher (mpirun, srun) started this process among, from its
 * environment (1 when not launched); in a build without MPI too. */
int ft_cli_launched_ranks(void);
/* Leave the job; failed: end every rank (MPI_Abort). */
void ft_cli_mpi_end(int failed);
/* This process's rank and the number of ranks in its run (its kind of device), and its rank
 * in the whole job. */
int ft_cli_mpi_rank(void);
int ft_cli_mpi_size(void);
int ft_cli_mpi_world_rank(void);
#define FT_CLI_MPI_MAX_RANKS 1024
/* Rank 0: split the ranks into groups for njobs jobs (as many groups as jobs, at most one per
 * rank; rank 0 in group 0) and return how many (1 when not distributed). */
int ft_cli_mpi_groups(int njobs);
/* Rank 0: group g's ranks as the workers of the session of job `job` (NULL when alone). */
const ft_tune_workers *ft_cli_mpi_workers(int g, int job);
/* Rank 0: with --candidate-timeout S, wait at most 2 S + 5 s for a worker's result, then end
 * the job with one line (a stopped or hung rank); 0: no limit. */
void ft_cli_mpi_result_timeout(double candidate_timeout_s);
/* Rank 0: group g's session is over; and, at the end, the whole run. */
void ft_cli_mpi_session_done(int g);
void ft_cli_mpi_all_done(void);
/* Another rank: the job of the next candidate rank 0 hands it (-1: the run is over), then
 * rank 0 as the server of that job's candidates (NULL on rank 0). */
int ft_cli_mpi_next_job(void);
const ft_tune_server *ft_cli_mpi_server(void);
/* Collective, on the ranks of one run (after ft_cli_mpi_split_by_device): every rank's key (one
 * "what: value" line per thing a run must share: its jobs' ops, sizes, attributes, the kernel
 * sources) against rank 0's. Returns 1 when they are the same; else 0 on every rank, with why
 * (one line naming the first rank that differs and its first difference) on every rank. */
int ft_cli_mpi_same_run(const char *key, char *why, size_t n);
/* Collective: group the ranks by device fingerprint, one run per kind of device (each with its
 * own rank 0). Returns how many kinds; *kind: this rank's (0 for rank 0's). */
int ft_cli_mpi_split_by_device(const char *device, int *kind);

#endif
