/* mpi_abi.c: find Open MPI's real functions and predefined handles, classify datatypes and
 * ops. Handles in Open MPI are pointers to library globals (ompi_mpi_float, ...), so a
 * predefined handle is recognised by comparing it with the global's address. */
#include "mpi_abi.h"

#include "common.h"
#include "resolve.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A predefined datatype the engine or the ordered path cares about. */
struct named_type {
    const char *symbol; /* Open MPI's global */
    enum reprod_element_class element_class;
    reprod_type engine_type; /* for REPROD_ELEMENT_ENGINE_FLOAT */
    int engine_elements;     /* 2 for complex */
};

/* Everything else named (integers, bytes, booleans, the pair types of MINLOC/MAXLOC) is not
 * float as far as sums go. The Fortran names have the C types' layouts in Open MPI; sizes are
 * checked once at first use, and a mismatch demotes the entry to the ordered path. */
static const struct named_type named_types[] = {
    {"ompi_mpi_float", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT32, 1},
    {"ompi_mpi_real", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT32, 1},
    {"ompi_mpi_real4", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT32, 1},
    {"ompi_mpi_double", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT64, 1},
    {"ompi_mpi_dblprec", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT64, 1},
    {"ompi_mpi_real8", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT64, 1},
    {"ompi_mpi_c_float_complex", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT32, 2},
    {"ompi_mpi_cxx_cplex", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT32, 2},
    {"ompi_mpi_cplex", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT32, 2},
    {"ompi_mpi_complex8", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT32, 2},
    {"ompi_mpi_c_double_complex", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT64, 2},
    {"ompi_mpi_cxx_dblcplex", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT64, 2},
    {"ompi_mpi_dblcplex", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT64, 2},
    {"ompi_mpi_complex16", REPROD_ELEMENT_ENGINE_FLOAT, REPROD_FLOAT64, 2},
    /* Floats the engine has no exact path for (x87 80-bit, binary128, binary16 Fortran). */
    {"ompi_mpi_long_double", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
    {"ompi_mpi_real2", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
    {"ompi_mpi_real16", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
    {"ompi_mpi_c_long_double_complex", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
    {"ompi_mpi_cxx_ldblcplex", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
    {"ompi_mpi_ldblcplex", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
    {"ompi_mpi_complex4", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
    {"ompi_mpi_complex32", REPROD_ELEMENT_OTHER_FLOAT, 0, 0},
};

/* Predefined ops whose result does not depend on the order of application. */
static const char *const deterministic_ops[] = {
    "ompi_mpi_op_max",    "ompi_mpi_op_min",    "ompi_mpi_op_land",    "ompi_mpi_op_band",
    "ompi_mpi_op_lor",    "ompi_mpi_op_bor",    "ompi_mpi_op_lxor",    "ompi_mpi_op_bxor",
    "ompi_mpi_op_maxloc", "ompi_mpi_op_minloc", "ompi_mpi_op_replace", "ompi_mpi_op_no_op",
    "ompi_mpi_op_null",
};

#define NAMED_TYPE_COUNT REPROD_ARRAY_LENGTH(named_types)
#define DET_OP_COUNT     REPROD_ARRAY_LENGTH(deterministic_ops)

static struct reprod_mpi mpi;
static void *named_type_handles[NAMED_TYPE_COUNT];
static struct named_type named_type_checked[NAMED_TYPE_COUNT]; /* after the size check */
static void *deterministic_op_handles[DET_OP_COUNT];
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;
static pthread_once_t sizes_once = PTHREAD_ONCE_INIT;

/* The real `PMPI_name`, or `MPI_name` outside the shim when the library has no PMPI layer. */
static void *resolve_function(const char *name)
{
    char symbol[64] = "PMPI_";
    strncat(symbol, name, sizeof symbol - 6);
    void *address = reprod_resolve(symbol);
    return address ? address : reprod_resolve(symbol + 1);
}

static void resolve_everything(void)
{
#define REPROD_MPI_RESOLVE(name)                                                                   \
    mpi.real.name = (__typeof__(PMPI_##name) *)resolve_function(#name);                            \
    if (!mpi.real.name && !mpi.why_not) mpi.why_not = "MPI_" #name " not found";
    REPROD_MPI_FUNCTIONS(REPROD_MPI_RESOLVE)
#undef REPROD_MPI_RESOLVE

    mpi.comm_world = (MPI_Comm)reprod_resolve_data("ompi_mpi_comm_world");
    mpi.comm_self = (MPI_Comm)reprod_resolve_data("ompi_mpi_comm_self");
    mpi.op_sum = (MPI_Op)reprod_resolve_data("ompi_mpi_op_sum");
    mpi.op_prod = (MPI_Op)reprod_resolve_data("ompi_mpi_op_prod");
    mpi.datatype_null = (MPI_Datatype)reprod_resolve_data("ompi_mpi_datatype_null");
    if (!mpi.comm_world || !mpi.comm_self || !mpi.op_sum || !mpi.op_prod)
        mpi.why_not = "the MPI library is not Open MPI (ompi_mpi_comm_world not found)";
    for (size_t i = 0; i < NAMED_TYPE_COUNT; i++) {
        named_type_handles[i] = reprod_resolve_data(named_types[i].symbol);
        named_type_checked[i] = named_types[i];
    }
    for (size_t i = 0; i < DET_OP_COUNT; i++)
        deterministic_op_handles[i] = reprod_resolve_data(deterministic_ops[i]);
    mpi.usable = mpi.why_not == NULL;
}

static _Atomic int mpi_state = REPROD_MPI_NOT_STARTED;

enum reprod_mpi_state reprod_mpi_state(void)
{
    int state = atomic_load_explicit(&mpi_state, memory_order_relaxed);
    if (state == REPROD_MPI_NOT_STARTED) {
        /* MPI may have been started without our MPI_Init hook seeing it (a tool calling
         * PMPI_Init): ask, and remember a yes. */
        int initialized = 0;
        const struct reprod_mpi *found = reprod_mpi();
        if (found->usable && found->real.Initialized(&initialized) == MPI_SUCCESS && initialized)
            atomic_compare_exchange_strong(&mpi_state, &state, REPROD_MPI_RUNNING);
        state = atomic_load(&mpi_state);
    }
    return (enum reprod_mpi_state)state;
}

void reprod_mpi_set_state(enum reprod_mpi_state state)
{
    atomic_store(&mpi_state, state);
}

const struct reprod_mpi *reprod_mpi(void)
{
    pthread_once(&resolve_once, resolve_everything);
    return &mpi;
}

/* Once MPI runs: demote an engine entry whose size is not what the engine expects (a
 * Fortran REAL built with another kind, say). Called only after MPI_Init. */
static void check_named_sizes(void)
{
    for (size_t i = 0; i < NAMED_TYPE_COUNT; i++) {
        struct named_type *entry = &named_type_checked[i];
        if (!named_type_handles[i] || entry->element_class != REPROD_ELEMENT_ENGINE_FLOAT) continue;
        int bytes = 0;
        size_t expected = reprod_type_size(entry->engine_type) * (size_t)entry->engine_elements;
        if (mpi.real.Type_size((MPI_Datatype)named_type_handles[i], &bytes) != MPI_SUCCESS ||
            (size_t)bytes != expected)
            entry->element_class = REPROD_ELEMENT_OTHER_FLOAT;
    }
}

/* Classify a named datatype by its handle. */
static void classify_named(MPI_Datatype datatype, struct reprod_mpi_type *type)
{
    pthread_once(&sizes_once, check_named_sizes);
    type->element_class = REPROD_ELEMENT_NOT_FLOAT;
    type->predefined = 1;
    for (size_t i = 0; i < NAMED_TYPE_COUNT; i++) {
        if (named_type_handles[i] && (void *)datatype == named_type_handles[i]) {
            type->element_class = named_type_checked[i].element_class;
            type->engine_type = named_type_checked[i].engine_type;
            type->engine_elements = named_type_checked[i].engine_elements;
            return;
        }
    }
}

/* 1 when the derived `datatype` holds a float anywhere; walks the type constructors. Types
 * nested deeper than we look are assumed to hold floats (the ordered path is always safe). */
static int derived_holds_float(MPI_Datatype datatype, int depth)
{
    int integers = 0, addresses = 0, datatypes = 0, combiner = 0;
    if (depth > 16 || mpi.real.Type_get_envelope(datatype, &integers, &addresses, &datatypes,
                                                 &combiner) != MPI_SUCCESS)
        return 1;
    if (combiner == MPI_COMBINER_NAMED) {
        struct reprod_mpi_type named;
        classify_named(datatype, &named);
        return named.element_class != REPROD_ELEMENT_NOT_FLOAT;
    }
    if (combiner == MPI_COMBINER_F90_REAL || combiner == MPI_COMBINER_F90_COMPLEX) return 1;
    if (datatypes <= 0) return 0;

    /* Derived types are rare in reductions and walked once per call: heap, not stack (a deep
     * type on a small thread stack must not overflow it). */
    int *integer_values = malloc(sizeof(int) * (size_t)(integers > 0 ? integers : 1));
    MPI_Aint *address_values = malloc(sizeof(MPI_Aint) * (size_t)(addresses > 0 ? addresses : 1));
    MPI_Datatype *inner = malloc(sizeof(MPI_Datatype) * (size_t)datatypes);
    int holds_float = 1;
    if (integer_values && address_values && inner &&
        mpi.real.Type_get_contents(datatype, integers, addresses, datatypes, integer_values,
                                   address_values, inner) == MPI_SUCCESS) {
        holds_float = 0;
        for (int i = 0; i < datatypes; i++) {
            if (!holds_float) holds_float = derived_holds_float(inner[i], depth + 1);
            /* get_contents returns new handles for derived constituents: give them back. */
            int inner_integers, inner_addresses, inner_datatypes;
            int inner_combiner = MPI_COMBINER_NAMED;
            if (mpi.real.Type_get_envelope(inner[i], &inner_integers, &inner_addresses,
                                           &inner_datatypes, &inner_combiner) == MPI_SUCCESS &&
                inner_combiner != MPI_COMBINER_NAMED)
                mpi.real.Type_free(&inner[i]);
        }
    }
    free(integer_values);
    free(address_values);
    free(inner);
    return holds_float;
}

int reprod_mpi_classify_type(MPI_Datatype datatype, struct reprod_mpi_type *type)
{
    memset(type, 0, sizeof *type);
    /* The float types we know are recognised by their address alone: no call into MPI. */
    pthread_once(&sizes_once, check_named_sizes);
    for (size_t i = 0; i < NAMED_TYPE_COUNT; i++) {
        if (named_type_handles[i] && (void *)datatype == named_type_handles[i]) {
            type->predefined = 1;
            type->element_class = named_type_checked[i].element_class;
            type->engine_type = named_type_checked[i].engine_type;
            type->engine_elements = named_type_checked[i].engine_elements;
            return MPI_SUCCESS;
        }
    }
    int integers, addresses, datatypes, combiner;
    int rc = mpi.real.Type_get_envelope(datatype, &integers, &addresses, &datatypes, &combiner);
    if (rc != MPI_SUCCESS) return rc;
    if (combiner == MPI_COMBINER_NAMED) {
        type->predefined = 1;
        type->element_class = REPROD_ELEMENT_NOT_FLOAT; /* not one of ours: integers, ... */
        return MPI_SUCCESS;
    }
    type->element_class =
        derived_holds_float(datatype, 0) ? REPROD_ELEMENT_OTHER_FLOAT : REPROD_ELEMENT_NOT_FLOAT;
    return MPI_SUCCESS;
}

enum reprod_op_class reprod_mpi_classify_op(MPI_Op op)
{
    if (op == mpi.op_sum) return REPROD_OPCLASS_SUM;
    if (op == mpi.op_prod) return REPROD_OPCLASS_PROD;
    for (size_t i = 0; i < DET_OP_COUNT; i++)
        if (deterministic_op_handles[i] && (void *)op == deterministic_op_handles[i])
            return REPROD_OPCLASS_DETERMINISTIC;
    return REPROD_OPCLASS_USER;
}
