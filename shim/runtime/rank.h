/* rank.h: which rank this process is, and how we know.
 *
 * Before MPI or NCCL start, the launchers' variables tell (RANK, OMPI_COMM_WORLD_RANK,
 * PMI_RANK, PMIX_RANK, SLURM_PROCID, in that order); afterwards the library itself does.
 */
#ifndef REPROD_RANK_H
#define REPROD_RANK_H

enum reprod_rank_source {
    REPROD_RANK_UNKNOWN = 0, /* nothing said: rank 0 is assumed */
    REPROD_RANK_FROM_ENV,    /* a launcher's variable */
    REPROD_RANK_FROM_LIBRARY /* MPI_COMM_WORLD or an NCCL communicator */
};

/* The rank of this process (0 when unknown). */
int reprod_rank(void);

/* The world size, or 0 when unknown. */
int reprod_world_size(void);

/* Where reprod_rank's answer came from; *variable gets the variable's name for
 * REPROD_RANK_FROM_ENV (may be NULL). */
enum reprod_rank_source reprod_rank_source(const char **variable);

/* Read the launchers' variables (idempotent; called by the constructor). */
void reprod_rank_discover_from_env(void);

/* Record the rank and size a library reported (MPI_COMM_WORLD or an NCCL communicator).
 * If a call noted by reprod_rank_note_assumed used rank 0 and `rank` is not 0, logs a warning
 * naming that call (once). */
void reprod_rank_set_from_library(int rank, int world_size);

/* Note that `api` (a string that lives forever) made a rank-dependent decision while no rank
 * was known, with rank 0. Only the first such call is remembered. */
void reprod_rank_note_assumed(const char *api);

#endif /* REPROD_RANK_H */
