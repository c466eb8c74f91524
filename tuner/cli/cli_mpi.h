/* cli_mpi.h: distributed tuning over MPI for the command line (cli_mpi.c,
 * docs/distributed.md). A build without MPI has the same functions: one process, rank 0. */
#ifndef FT_CLI_MPI_H
#define FT_CLI_MPI_H

#include <math.h>
#include <stddef.h>

#include "flaretune/tune.h"

/* Join the job when started by a launcher (mpirun, srun): MPI_Init, this node's share of the
 * CPUs and its GPU. Returns 1 when distributed (then call ft_cli_mpi_end before exiting). */
int ft_cli_mpi_start(int *argc, char ***argv);
/* Leave the job; failed: end every rank (MPI_Abort). */
void ft_cli_mpi_end(int failed);
int ft_cli_mpi_rank(void);
int ft_cli_mpi_size(void);
/* Rank 0: the other ranks as the session's workers (NULL when alone). */
const ft_tune_workers *ft_cli_mpi_workers(void);
/* Rank 0: tell the workers the session is over (they go on to the next job). */
void ft_cli_mpi_session_done(void);
/* Another rank: rank 0 as the server of its candidates (NULL on rank 0). */
const ft_tune_server *ft_cli_mpi_server(void);
/* Collective: do all ranks run on this device? When not, rank 0 gets why. */
int ft_cli_mpi_same_device(const char *device, char *why, size_t n);

#endif
