/* mpi_abi.c: recognise the MPI family of the process, find its real functions and predefined
 * handles, and classify datatypes and ops. Everything here runs once, or per call without a
 * lock. */
#include "mpi/mpi_abi.h"

#include "common.h"
#include "interpose/once.h"
#include "interpose/resolve.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A family's tables hold at most this many predefined float types. */
#define MAX_FLOAT_TYPES 32
/* How deep a derived datatype is walked; deeper ones are assumed to hold floats (the ordered
 * path is always safe). */
#define MAX_TYPE_DEPTH 16

static struct reprod_mpi mpi;
static struct reprod_once resolve_once = REPROD_ONCE_INIT;

/* Predefined float types: their handles and their classes once sizes were checked. */
static mpi_handle float_handles[MAX_FLOAT_TYPES];
static struct mpi_named_type float_checked[MAX_FLOAT_TYPES];
static size_t float_count;
/* Predefined ops whose result does not depend on the order of application. */
#define MAX_DETERMINISTIC_OPS 16
static mpi_handle deterministic_ops[MAX_DETERMINISTIC_OPS];
static size_t deterministic_op_count;
static struct reprod_once sizes_once = REPROD_ONCE_INIT; /* checked on every call: inline */

/* What a function the library lacks answers: MPI_ERR_INTERN (MPICH's value when no family is
 * known). The data paths check HAS_MPI first; a hook reaches it only for a function of a newer
 * MPI than the library (MPI_Allreduce_c on an MPI-3 library, say), which a program that found
 * the shim's export by name may call: an error, never a call through NULL. */
static int function_missing(void)
{
    return mpi.abi ? mpi.abi->err_intern : 16;
}

/* How the table of real functions finds `symbol` (MPI_name, MPIX_name): PMPI_name (PMPIX_name),
 * else the name itself, outside the shim. The persistent all-gather goes by the family's name. */
static void *find_function(const char *symbol)
{
    if (mpi.abi && strcmp(symbol, "MPI_Allgather_init") == 0) symbol = mpi.abi->allgather_init_name;
    char profiling[80];
    snprintf(profiling, sizeof profiling, "P%s", symbol);
    void *address = reprod_resolve(profiling);
    return address ? address : reprod_resolve(symbol);
}

REPROD_REAL_TABLE(real_functions, struct mpi_functions, REPROD_MPI_FUNCTIONS, find_function);
_Static_assert(MPI_FUNCTION_COUNT <= sizeof(((struct reprod_mpi *)0)->has), "reprod_mpi.has");

/* The library's version string, or "" (MPI_Get_library_version may run before MPI_Init). */
static const char *library_version(void)
{
    static char text[8192]; /* MPI_MAX_LIBRARY_VERSION_STRING is 8192 in MPICH */
    int (*version)(char *, int *) = REPROD_REAL(real_functions, Get_library_version);
    int length = 0;
    if (!version || version(text, &length) != REPROD_MPI_OK) return "";
    text[length > 0 && (size_t)length < sizeof text ? length : (int)sizeof text - 1] = '\0';
    return text;
}

/* The family of the loaded MPI library, by its marks: Open MPI by its globals, the MPICH
 * family by its version string or its internals; NULL when it is none we know. Recognised
 * whether or not this shim was built with the family's headers. */
static const struct mpi_constants *detect_family(void)
{
    if (reprod_resolve_data("ompi_mpi_comm_world")) return &reprod_mpi_openmpi;
    if (!REPROD_REAL(real_functions, Init)) return NULL;
    const char *version = library_version();
    if (strstr(version, "MPICH") || strstr(version, "MVAPICH") || strstr(version, "Intel(R) MPI"))
        return &reprod_mpi_mpich;
    if (reprod_resolve("MPIR_Err_create_code")) return &reprod_mpi_mpich;
    return NULL;
}

/* A predefined handle of the family: its value, or the address of its global (0: absent). */
static mpi_handle predefined(struct mpi_predefined handle)
{
    if (!handle.symbol) return handle.value;
    return (mpi_handle)reprod_resolve_data(handle.symbol);
}

/* Functions without which the data paths cannot run. */
static const int required_functions[] = {
    MPI_FUNCTION_Allgather,       MPI_FUNCTION_Allgatherv,           MPI_FUNCTION_Alltoallv,
    MPI_FUNCTION_Alltoallw,       MPI_FUNCTION_Gather,               MPI_FUNCTION_Gatherv,
    MPI_FUNCTION_Iallgather,      MPI_FUNCTION_Igather,              MPI_FUNCTION_Ialltoallv,
    MPI_FUNCTION_Ialltoallw,      MPI_FUNCTION_Request_get_status,   MPI_FUNCTION_Initialized,
    MPI_FUNCTION_Abort,           MPI_FUNCTION_Error_class,          MPI_FUNCTION_Comm_size,
    MPI_FUNCTION_Comm_rank,       MPI_FUNCTION_Comm_test_inter,      MPI_FUNCTION_Type_size_x,
    MPI_FUNCTION_Type_get_extent, MPI_FUNCTION_Type_get_true_extent, MPI_FUNCTION_Type_get_envelope,
    MPI_FUNCTION_Type_get_contents, MPI_FUNCTION_Comm_call_errhandler, MPI_FUNCTION_Type_free,
    MPI_FUNCTION_Type_create_hindexed, MPI_FUNCTION_Type_commit,     MPI_FUNCTION_Pack,
    MPI_FUNCTION_Unpack,          MPI_FUNCTION_Reduce_local,         MPI_FUNCTION_Op_free,
};

/* Every function of the table, looked up now that the family is known; a missing one
 * answers MPI_ERR_INTERN (function_missing). */
static void resolve_functions(void)
{
    mpi.real = *REPROD_REAL_ALL(real_functions);
    void **slots = (void **)&mpi.real;
    for (int i = 0; i < MPI_FUNCTION_COUNT; i++) {
        mpi.has[i] = slots[i] != NULL;
        if (!mpi.has[i]) slots[i] = (void *)(void (*)(void))function_missing;
    }
    static char missing[128]; /* written once, under resolve_once */
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(required_functions) && !mpi.why_not; i++) {
        if (mpi.has[required_functions[i]]) continue;
        snprintf(missing, sizeof missing,
                 "%s, which the data paths need, is missing from the MPI library",
                 real_functions_symbols[required_functions[i]]);
        mpi.why_not = missing;
    }
}

static void resolve_handles(void)
{
    const struct mpi_constants *abi = mpi.abi;
    mpi.comm_world = predefined(abi->comm_world);
    mpi.comm_self = predefined(abi->comm_self);
    mpi.comm_null = predefined(abi->comm_null);
    mpi.datatype_null = predefined(abi->datatype_null);
    mpi.op_null = predefined(abi->op_null);
    mpi.request_null = predefined(abi->request_null);
    mpi.op_sum = predefined(abi->op_sum);
    mpi.op_prod = predefined(abi->op_prod);
    mpi.op_max = predefined(abi->op_max);
    mpi.datatype_int8 = predefined(abi->datatype_int8);
    mpi.datatype_int64 = predefined(abi->datatype_int64);
    if (!mpi.comm_world || !mpi.comm_self || !mpi.op_sum || !mpi.op_prod || !mpi.request_null)
        mpi.why_not = "the MPI library's predefined handles were not found";
    for (size_t i = 0; i < abi->float_type_count && float_count < MAX_FLOAT_TYPES; i++) {
        mpi_handle handle = predefined(abi->float_types[i].handle);
        if (!handle || handle == mpi.datatype_null) continue; /* not built into this library */
        float_handles[float_count] = handle;
        float_checked[float_count++] = abi->float_types[i];
    }
    for (size_t i = 0; i < abi->deterministic_op_count && i < MAX_DETERMINISTIC_OPS; i++) {
        mpi_handle handle = predefined(abi->deterministic_ops[i]);
        if (handle) deterministic_ops[deterministic_op_count++] = handle;
    }
}

/* The library's functions are resolved whatever its family: a hook the shim cannot serve
 * still hands its call to the real function (never a NULL call), and handles then pass
 * unmasked, as the caller gave them. A family's table is empty (no .family) when the shim was
 * built without its headers. */
static void resolve_everything(void)
{
    /* From the start: a fork child whose parent was in the middle of it runs it again. */
    memset(&mpi, 0, sizeof mpi);
    float_count = 0;
    deterministic_op_count = 0;
    mpi.handle_mask = ~(mpi_handle)0;
    const struct mpi_constants *found = detect_family();
    mpi.abi = found && found->family ? found : NULL;
    resolve_functions();
    if (!found) {
        mpi.why_not = "the MPI library is neither Open MPI nor of the MPICH family";
        return;
    }
    if (!mpi.abi) {
        mpi.why_not = found == &reprod_mpi_mpich
                          ? "the MPI library is of the MPICH family, and this shim was built "
                            "without MPICH's headers (libmpich-dev)"
                          : "the MPI library is Open MPI, and this shim was built without Open "
                            "MPI's headers (libopenmpi-dev)";
        return;
    }
    if (mpi.abi->handle_bytes < sizeof(mpi_handle))
        mpi.handle_mask = ((mpi_handle)1 << (8 * mpi.abi->handle_bytes)) - 1;
    resolve_handles();
    mpi.usable = mpi.why_not == NULL;
}

_Atomic(const struct reprod_mpi *) reprod_mpi_resolved;

/* What a hook reached from inside resolve_everything (on its own thread) gets: no MPI to work
 * with yet, every function answering MPI_ERR_INTERN, handles as given. */
#define REPROD_MPI_MISSING(field, symbol, type) .field = (type)(void (*)(void))function_missing,
static const struct reprod_mpi unresolved = {
    .why_not = "the MPI library is still being looked up",
    .handle_mask = ~(mpi_handle)0,
    .real = {REPROD_MPI_FUNCTIONS(REPROD_MPI_MISSING)},
};
#undef REPROD_MPI_MISSING

const struct reprod_mpi *reprod_mpi_resolve(void)
{
    if (!reprod_once(&resolve_once, resolve_everything)) return &unresolved;
    atomic_store_explicit(&reprod_mpi_resolved, &mpi, memory_order_release);
    return &mpi;
}

mpi_handle mpi_handle_load(const void *array, long index)
{
    size_t bytes = mpi.abi->handle_bytes;
    mpi_handle handle = 0;
    memcpy(&handle, (const char *)array + (size_t)index * bytes, bytes); /* little-endian */
    return handle;
}

void mpi_handle_store(void *array, long index, mpi_handle handle)
{
    size_t bytes = mpi.abi->handle_bytes;
    memcpy((char *)array + (size_t)index * bytes, &handle, bytes);
}

int mpi_status_error(const void *statuses, long index)
{
    int error;
    const char *status = (const char *)statuses + (size_t)index * mpi.abi->status_bytes;
    memcpy(&error, status + mpi.abi->status_error_offset, sizeof error);
    return error;
}

int mpi_error_class(int code)
{
    int error_class = code;
    if (code != REPROD_MPI_OK && mpi.usable && mpi.real.Error_class(code, &error_class) != 0)
        error_class = code;
    return error_class;
}

static _Atomic int mpi_state = REPROD_MPI_NOT_STARTED;
static _Atomic int live_sessions;
/* MPI_COMM_WORLD's size << 32 | our rank in it while the world model runs as our MPI_Init hook
 * saw it; 0 when not known. */
static _Atomic uint64_t world_geometry;

void reprod_mpi_count_session(int change)
{
    atomic_fetch_add(&live_sessions, change);
}

int reprod_mpi_world_running(void)
{
    int state = atomic_load_explicit(&mpi_state, memory_order_relaxed);
    if (state == REPROD_MPI_NOT_STARTED) {
        /* MPI may have been started without our MPI_Init hook seeing it (a tool calling
         * PMPI_Init before the shim was loaded): ask, and remember a yes. */
        int initialized = 0;
        const struct reprod_mpi *found = reprod_mpi();
        if (found->usable && found->real.Initialized(&initialized) == REPROD_MPI_OK && initialized)
            atomic_compare_exchange_strong(&mpi_state, &state, REPROD_MPI_RUNNING);
        state = atomic_load(&mpi_state);
    }
    return state == REPROD_MPI_RUNNING;
}

enum reprod_mpi_state reprod_mpi_state(void)
{
    if (atomic_load_explicit(&live_sessions, memory_order_relaxed) > 0) return REPROD_MPI_RUNNING;
    if (reprod_mpi_world_running()) return REPROD_MPI_RUNNING;
    return (enum reprod_mpi_state)atomic_load(&mpi_state);
}

void reprod_mpi_set_state(enum reprod_mpi_state state)
{
    if (state != REPROD_MPI_RUNNING) atomic_store(&world_geometry, 0);
    atomic_store(&mpi_state, state);
}

void reprod_mpi_note_world(int size, int rank)
{
    if (size > 0 && rank >= 0 && rank < size)
        atomic_store(&world_geometry, (uint64_t)size << 32 | (uint32_t)rank);
}

int reprod_mpi_world_geometry(int *size, int *rank)
{
    uint64_t geometry = atomic_load_explicit(&world_geometry, memory_order_relaxed);
    if (!geometry) return 0;
    *size = (int)(geometry >> 32);
    *rank = (int)(uint32_t)geometry;
    return 1;
}

/* Once MPI runs: demote an engine entry whose size is not what the engine expects (a
 * Fortran REAL built with another kind, say). */
static void check_named_sizes(void)
{
    for (size_t i = 0; i < float_count; i++) {
        struct mpi_named_type *entry = &float_checked[i];
        if (entry->element_class != REPROD_ELEMENT_ENGINE_FLOAT) continue;
        mpi_count bytes = 0;
        size_t expected = reprod_type_size(entry->engine_type) * (size_t)entry->engine_elements;
        if (mpi.real.Type_size_x(float_handles[i], &bytes) != REPROD_MPI_OK ||
            (size_t)bytes != expected)
            entry->element_class = REPROD_ELEMENT_OTHER_FLOAT;
    }
}

/* A predefined float type by its handle alone: 1 and *type filled, or 0. */
static int classify_known(mpi_handle datatype, struct reprod_mpi_type *type)
{
    reprod_once(&sizes_once, check_named_sizes);
    for (size_t i = 0; i < float_count; i++) {
        if (datatype != float_handles[i]) continue;
        type->predefined = 1;
        type->element_class = float_checked[i].element_class;
        type->engine_type = float_checked[i].engine_type;
        type->engine_elements = float_checked[i].engine_elements;
        return 1;
    }
    return 0;
}

/* A Fortran 90 parameterised type (MPI_Type_create_f90_real / _complex / _integer): a
 * predefined type whose layout is a plain float, complex or integer of its size. */
static void classify_f90(mpi_handle datatype, int combiner, struct reprod_mpi_type *type)
{
    mpi_count bytes = 0;
    type->predefined = 1;
    type->element_class = REPROD_ELEMENT_NOT_FLOAT;
    if (combiner == mpi.abi->combiner_f90_integer) return;
    type->element_class = REPROD_ELEMENT_OTHER_FLOAT;
    int parts = combiner == mpi.abi->combiner_f90_complex ? 2 : 1;
    if (mpi.real.Type_size_x(datatype, &bytes) != REPROD_MPI_OK) return;
    if (bytes == 4 * parts || bytes == 8 * parts) {
        type->element_class = REPROD_ELEMENT_ENGINE_FLOAT;
        type->engine_type = bytes == 4 * parts ? REPROD_FLOAT32 : REPROD_FLOAT64;
        type->engine_elements = parts;
    }
}

static int is_f90(int combiner)
{
    return combiner == mpi.abi->combiner_f90_real || combiner == mpi.abi->combiner_f90_complex ||
           combiner == mpi.abi->combiner_f90_integer;
}

/* 1 when the derived `datatype` holds a float anywhere; walks the type constructors. */
static int derived_holds_float(mpi_handle datatype, int depth)
{
    int integers = 0, addresses = 0, datatypes = 0, combiner = 0;
    if (depth > MAX_TYPE_DEPTH || mpi.real.Type_get_envelope(datatype, &integers, &addresses,
                                                             &datatypes, &combiner) != REPROD_MPI_OK)
        return 1;
    if (combiner == mpi.abi->combiner_named) {
        struct reprod_mpi_type named = {0};
        return classify_known(datatype, &named);
    }
    if (is_f90(combiner)) return combiner != mpi.abi->combiner_f90_integer;
    if (datatypes <= 0) return 0;

    /* Derived types are rare in reductions and walked once per call: heap, not stack (a deep
     * type on a small thread stack must not overflow it). */
    int *integer_values = malloc(sizeof(int) * (size_t)(integers > 0 ? integers : 1));
    mpi_count *address_values = malloc(sizeof(mpi_count) * (size_t)(addresses > 0 ? addresses : 1));
    void *inner = calloc((size_t)datatypes, mpi.abi->handle_bytes);
    int holds_float = 1;
    if (integer_values && address_values && inner &&
        mpi.real.Type_get_contents(datatype, integers, addresses, datatypes, integer_values,
                                   address_values, inner) == REPROD_MPI_OK) {
        holds_float = 0;
        for (int i = 0; i < datatypes; i++) {
            mpi_handle constituent = mpi_handle_load(inner, i);
            if (!holds_float) holds_float = derived_holds_float(constituent, depth + 1);
            /* get_contents returns new handles for derived constituents: give them back. */
            int inner_integers, inner_addresses, inner_datatypes;
            int inner_combiner = mpi.abi->combiner_named;
            if (mpi.real.Type_get_envelope(constituent, &inner_integers, &inner_addresses,
                                           &inner_datatypes, &inner_combiner) == REPROD_MPI_OK &&
                inner_combiner != mpi.abi->combiner_named && !is_f90(inner_combiner))
                mpi.real.Type_free(&constituent);
        }
    }
    free(integer_values);
    free(address_values);
    free(inner);
    return holds_float;
}

int reprod_mpi_classify_type(mpi_handle datatype, struct reprod_mpi_type *type)
{
    memset(type, 0, sizeof *type);
    /* The float types we know are recognised by their handle alone: no call into MPI. */
    if (classify_known(datatype, type)) return REPROD_MPI_OK;
    int integers, addresses, datatypes, combiner;
    int rc = mpi.real.Type_get_envelope(datatype, &integers, &addresses, &datatypes, &combiner);
    if (rc != REPROD_MPI_OK) return rc;
    if (combiner == mpi.abi->combiner_named) {
        type->predefined = 1;
        type->element_class = REPROD_ELEMENT_NOT_FLOAT; /* not one of ours: integers, ... */
        return REPROD_MPI_OK;
    }
    if (is_f90(combiner)) {
        classify_f90(datatype, combiner, type);
        return REPROD_MPI_OK;
    }
    type->element_class =
        derived_holds_float(datatype, 0) ? REPROD_ELEMENT_OTHER_FLOAT : REPROD_ELEMENT_NOT_FLOAT;
    return REPROD_MPI_OK;
}

enum reprod_op_class reprod_mpi_classify_op(mpi_handle op)
{
    if (op == mpi.op_sum) return REPROD_OPCLASS_SUM;
    if (op == mpi.op_prod) return REPROD_OPCLASS_PROD;
    for (size_t i = 0; i < deterministic_op_count; i++)
        if (op == deterministic_ops[i]) return REPROD_OPCLASS_DETERMINISTIC;
    return REPROD_OPCLASS_USER;
}
