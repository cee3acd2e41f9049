/* mpi_abi_openmpi.c: Open MPI's ABI, read from its own mpi.h (compiled with Open MPI's include
 * directories, and only this file is). Its predefined handles are the addresses of library
 * globals: they are named here and looked up at run time, never referred to at link time.
 * Built without Open MPI's headers (make MPI_FAMILIES=mpich), the table is empty and an Open
 * MPI job is passed through, logged. Any other mpi.h is refused: MPICH's 32-bit handle types
 * in this table would truncate every Open MPI handle. */
#include "mpi/mpi_abi.h"

#ifdef REPROD_WITHOUT_OPENMPI_HEADERS
const struct mpi_constants reprod_mpi_openmpi = {.family = NULL};
#else
#include <mpi.h>
#include <stddef.h>

#if !defined(OPEN_MPI) || defined(MPICH_VERSION)
/* Another family's mpi.h (found on the compiler's path, say): its constants would be wrong. */
#error "hooks/mpi/abi/mpi_abi_openmpi.c needs Open MPI's mpi.h: check MPICC"
#endif

#define NAMED(symbol) {0, symbol}
#define ENGINE(symbol, type, elements) {NAMED(symbol), REPROD_ELEMENT_ENGINE_FLOAT, type, elements}
#define OTHER(symbol) {NAMED(symbol), REPROD_ELEMENT_OTHER_FLOAT, 0, 0}

/* The Fortran names have the C types' layouts in Open MPI; sizes are checked once MPI runs
 * (mpi_abi.c), and a mismatch demotes an entry to the ordered path. */
static const struct mpi_named_type float_types[] = {
    ENGINE("ompi_mpi_float", REPROD_FLOAT32, 1),
    ENGINE("ompi_mpi_real", REPROD_FLOAT32, 1),
    ENGINE("ompi_mpi_real4", REPROD_FLOAT32, 1),
    ENGINE("ompi_mpi_double", REPROD_FLOAT64, 1),
    ENGINE("ompi_mpi_dblprec", REPROD_FLOAT64, 1),
    ENGINE("ompi_mpi_real8", REPROD_FLOAT64, 1),
    ENGINE("ompi_mpi_c_float_complex", REPROD_FLOAT32, 2),
    ENGINE("ompi_mpi_cxx_cplex", REPROD_FLOAT32, 2),
    ENGINE("ompi_mpi_cplex", REPROD_FLOAT32, 2),
    ENGINE("ompi_mpi_complex8", REPROD_FLOAT32, 2),
    ENGINE("ompi_mpi_c_double_complex", REPROD_FLOAT64, 2),
    ENGINE("ompi_mpi_cxx_dblcplex", REPROD_FLOAT64, 2),
    ENGINE("ompi_mpi_dblcplex", REPROD_FLOAT64, 2),
    ENGINE("ompi_mpi_complex16", REPROD_FLOAT64, 2),
    /* Floats the engine has no exact path for (x87 80-bit, binary128, Fortran binary16). */
    OTHER("ompi_mpi_long_double"),
    OTHER("ompi_mpi_real2"),
    OTHER("ompi_mpi_real16"),
    OTHER("ompi_mpi_c_long_double_complex"),
    OTHER("ompi_mpi_cxx_ldblcplex"),
    OTHER("ompi_mpi_ldblcplex"),
    OTHER("ompi_mpi_complex4"),
    OTHER("ompi_mpi_complex32"),
};

/* Predefined ops whose result does not depend on the order of application. */
static const struct mpi_predefined deterministic_ops[] = {
    NAMED("ompi_mpi_op_max"),    NAMED("ompi_mpi_op_min"),    NAMED("ompi_mpi_op_land"),
    NAMED("ompi_mpi_op_band"),   NAMED("ompi_mpi_op_lor"),    NAMED("ompi_mpi_op_bor"),
    NAMED("ompi_mpi_op_lxor"),   NAMED("ompi_mpi_op_bxor"),   NAMED("ompi_mpi_op_maxloc"),
    NAMED("ompi_mpi_op_minloc"), NAMED("ompi_mpi_op_replace"), NAMED("ompi_mpi_op_no_op"),
};

const struct mpi_constants reprod_mpi_openmpi = {
    .family = "Open MPI",
    .handle_bytes = sizeof(MPI_Datatype),
    .status_bytes = sizeof(MPI_Status),
    .status_error_offset = offsetof(MPI_Status, MPI_ERROR),
    .in_place = (uintptr_t)MPI_IN_PLACE,
    .status_ignore = (uintptr_t)MPI_STATUS_IGNORE,
    .statuses_ignore = (uintptr_t)MPI_STATUSES_IGNORE,
    .undefined = MPI_UNDEFINED,
    .err_buffer = MPI_ERR_BUFFER,
    .err_count = MPI_ERR_COUNT,
    .err_type = MPI_ERR_TYPE,
    .err_op = MPI_ERR_OP,
    .err_arg = MPI_ERR_ARG,
    .err_root = MPI_ERR_ROOT,
    .err_other = MPI_ERR_OTHER,
    .err_intern = MPI_ERR_INTERN,
    .err_in_status = MPI_ERR_IN_STATUS,
    .err_pending = MPI_ERR_PENDING,
    .err_no_mem = MPI_ERR_NO_MEM,
    .err_request = MPI_ERR_REQUEST,
    .combiner_named = MPI_COMBINER_NAMED,
    .combiner_f90_real = MPI_COMBINER_F90_REAL,
    .combiner_f90_complex = MPI_COMBINER_F90_COMPLEX,
    .combiner_f90_integer = MPI_COMBINER_F90_INTEGER,
    .comm_world = NAMED("ompi_mpi_comm_world"),
    .comm_self = NAMED("ompi_mpi_comm_self"),
    .comm_null = NAMED("ompi_mpi_comm_null"),
    .datatype_null = NAMED("ompi_mpi_datatype_null"),
    .op_null = NAMED("ompi_mpi_op_null"),
    .request_null = NAMED("ompi_request_null"),
    .op_sum = NAMED("ompi_mpi_op_sum"),
    .op_prod = NAMED("ompi_mpi_op_prod"),
    .op_max = NAMED("ompi_mpi_op_max"),
    .datatype_int8 = NAMED("ompi_mpi_int8_t"),
    .datatype_int64 = NAMED("ompi_mpi_int64_t"),
    .float_types = float_types,
    .float_type_count = sizeof float_types / sizeof float_types[0],
    .deterministic_ops = deterministic_ops,
    .deterministic_op_count = sizeof deterministic_ops / sizeof deterministic_ops[0],
    .allgather_init_name = "MPIX_Allgather_init",
};
#endif
