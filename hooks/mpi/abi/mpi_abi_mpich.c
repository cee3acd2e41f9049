/* mpi_abi_mpich.c: the ABI of the MPICH family (MPICH, MVAPICH, Intel MPI, Cray MPICH), read
 * from MPICH's own mpi.h (compiled with MPICH's include directory, and only this file is).
 * Its handles are 32-bit integers known at compile time. Built without MPICH's headers
 * (make MPI_FAMILIES=openmpi), the table is empty and an MPICH job is passed through, logged.
 * Any other mpi.h is refused: Open MPI's constants in this table would make every MPICH rank
 * misread its handles. */
#include "mpi/mpi_abi.h"

#ifdef REPROD_WITHOUT_MPICH_HEADERS
const struct mpi_constants reprod_mpi_mpich = {.family = NULL};
#else
#include <mpi.h>
#include <stddef.h>

#if defined(OPEN_MPI) || !(defined(MPICH_VERSION) || defined(MPICH_NAME) || defined(I_MPI_VERSION))
/* Another family's mpi.h (found on the compiler's path, say): its constants would be wrong. */
#error "hooks/mpi/abi/mpi_abi_mpich.c needs the MPICH family's mpi.h: check MPICC_MPICH"
#endif

/* A handle as the hooks carry it: the int's 32 bits, never sign-extended (MPI_DOUBLE_INT is
 * 0x8c000001, negative as an int). */
#define VALUE(handle) {(uintptr_t)(uint32_t)(handle), NULL}
#define ENGINE(handle, type, elements) {VALUE(handle), REPROD_ELEMENT_ENGINE_FLOAT, type, elements}
#define OTHER(handle) {VALUE(handle), REPROD_ELEMENT_OTHER_FLOAT, 0, 0}

/* Every predefined float type; one MPICH was built without is MPI_DATATYPE_NULL and never
 * matches (mpi_abi.c skips it). Sizes are checked once MPI runs. */
static const struct mpi_named_type float_types[] = {
    ENGINE(MPI_FLOAT, REPROD_FLOAT32, 1),
    ENGINE(MPI_REAL, REPROD_FLOAT32, 1),
    ENGINE(MPI_REAL4, REPROD_FLOAT32, 1),
    ENGINE(MPI_DOUBLE, REPROD_FLOAT64, 1),
    ENGINE(MPI_DOUBLE_PRECISION, REPROD_FLOAT64, 1),
    ENGINE(MPI_REAL8, REPROD_FLOAT64, 1),
    ENGINE(MPI_C_FLOAT_COMPLEX, REPROD_FLOAT32, 2),
    ENGINE(MPI_CXX_FLOAT_COMPLEX, REPROD_FLOAT32, 2),
    ENGINE(MPI_COMPLEX, REPROD_FLOAT32, 2),
    ENGINE(MPI_COMPLEX8, REPROD_FLOAT32, 2),
    ENGINE(MPI_C_DOUBLE_COMPLEX, REPROD_FLOAT64, 2),
    ENGINE(MPI_CXX_DOUBLE_COMPLEX, REPROD_FLOAT64, 2),
    ENGINE(MPI_DOUBLE_COMPLEX, REPROD_FLOAT64, 2),
    ENGINE(MPI_COMPLEX16, REPROD_FLOAT64, 2),
#ifdef MPIX_C_FLOAT16
    ENGINE(MPIX_C_FLOAT16, REPROD_FLOAT16, 1),
#endif
    OTHER(MPI_LONG_DOUBLE),
    OTHER(MPI_REAL16),
    OTHER(MPI_C_LONG_DOUBLE_COMPLEX),
    OTHER(MPI_CXX_LONG_DOUBLE_COMPLEX),
    OTHER(MPI_COMPLEX32),
};

static const struct mpi_predefined deterministic_ops[] = {
    VALUE(MPI_MAX),  VALUE(MPI_MIN),    VALUE(MPI_LAND),   VALUE(MPI_BAND),
    VALUE(MPI_LOR),  VALUE(MPI_BOR),    VALUE(MPI_LXOR),   VALUE(MPI_BXOR),
    VALUE(MPI_MAXLOC), VALUE(MPI_MINLOC), VALUE(MPI_REPLACE), VALUE(MPI_NO_OP),
};

const struct mpi_constants reprod_mpi_mpich = {
    .family = "MPICH",
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
    .comm_world = VALUE(MPI_COMM_WORLD),
    .comm_self = VALUE(MPI_COMM_SELF),
    .comm_null = VALUE(MPI_COMM_NULL),
    .datatype_null = VALUE(MPI_DATATYPE_NULL),
    .op_null = VALUE(MPI_OP_NULL),
    .request_null = VALUE(MPI_REQUEST_NULL),
    .op_sum = VALUE(MPI_SUM),
    .op_prod = VALUE(MPI_PROD),
    .op_max = VALUE(MPI_MAX),
    .datatype_int8 = VALUE(MPI_INT8_T),
    .datatype_int64 = VALUE(MPI_INT64_T),
    .float_types = float_types,
    .float_type_count = sizeof float_types / sizeof float_types[0],
    .deterministic_ops = deterministic_ops,
    .deterministic_op_count = sizeof deterministic_ops / sizeof deterministic_ops[0],
    .allgather_init_name = "MPI_Allgather_init",
    .persistent_derived_broken = 1,
};
#endif
