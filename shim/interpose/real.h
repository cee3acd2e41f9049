/* real.h: the real functions the shim calls, found one way for every library it stands in
 * front of: libc, cuRAND, PyTorch, MPI, NCCL and the CUDA driver. (Darshan declares every
 * real function with one wrapper-macro family; libfaketime fills every real_* pointer in one
 * place. Here: the REPROD_REAL_* macros, and reprod_real_lookup in real.c.)
 *
 * A subsystem lists its functions once, as X(field, symbol, type) per function: the name of
 * its pointer, the symbol it is looked up by and the pointer's type (REPROD_REAL_AS_HOOK(X,
 * name) lists a function under its own name with the type of the shim's hook of that name).
 * From the list:
 *   struct S { REPROD_REAL_FIELDS(LIST) };         the functions as typed pointers
 *   REPROD_REAL_TABLE(name, struct S, LIST, find); the table `name`: the pointers
 *                                                  (name.functions) and how they are found:
 *                                                  find(symbol), or reprod_resolve when NULL
 * and two ways to use a table:
 *   REPROD_REAL(name, field)   one function, looked up on its first use: a hook's own real
 *                              function. NULL while no loaded object defines it.
 *   REPROD_REAL_ALL(name)      the struct, every function looked up on the first use: the data
 *                              paths of MPI, NCCL and CUDA, which call many. A NULL field is a
 *                              function the process lacks.
 *
 * A lookup takes no lock and needs no initialisation. It is safe before the constructor (the
 * tables are static data), from any number of threads (racing threads find the same address;
 * the first one's store is kept), in a fork child (nothing can be left held) and when
 * re-entered (a lookup reached from inside a lookup looks up again; nothing waits). A function
 * found is kept. One not found is looked up again on its next REPROD_REAL, until a
 * REPROD_REAL_ALL of its table has looked everything up: from then on NULL is final.
 */
#ifndef REPROD_REAL_H
#define REPROD_REAL_H

#include "common.h"
#include "interpose/resolve.h"
#include "runtime/log.h"

#include <stdatomic.h>
#include <stddef.h>

/* How a table finds a symbol's address (NULL when no loaded object defines it). */
typedef void *reprod_real_finder(const char *symbol);

struct reprod_real_table {
    const char *const *symbols; /* the list's symbols, in its order */
    int count;
    reprod_real_finder *find; /* NULL: reprod_resolve */
    void **functions;         /* the struct of pointers, as `count` slots */
    _Atomic int complete;     /* every slot was looked up (REPROD_REAL_ALL) */
};

/* Slot `index` of `table`: looked up now unless found before (real.c). */
void *reprod_real_lookup(struct reprod_real_table *table, int index);

/* Look up every slot not found yet, then mark the table complete (real.c). */
void reprod_real_complete(struct reprod_real_table *table);

static inline void *reprod_real_slot(struct reprod_real_table *table, int index)
{
    void *function = __atomic_load_n(&table->functions[index], __ATOMIC_ACQUIRE);
    return REPROD_LIKELY(function != NULL) ? function : reprod_real_lookup(table, index);
}

static inline void reprod_real_complete_once(struct reprod_real_table *table)
{
    if (REPROD_UNLIKELY(!atomic_load_explicit(&table->complete, memory_order_acquire)))
        reprod_real_complete(table);
}

/* One entry of a list: a pointer of the struct, a symbol of the table. */
#define REPROD_REAL_POINTER(field, symbol, type) __typeof__(type) field;
#define REPROD_REAL_SYMBOL(field, symbol, type)  symbol,
#define REPROD_REAL_FIELDS(LIST)                 LIST(REPROD_REAL_POINTER)

/* An entry for a function the shim hooks under the same name: the real one has its type. */
#define REPROD_REAL_AS_HOOK(X, name) X(name, #name, __typeof__(&name))

/* Define the table `name` of the functions of LIST, whose pointers are `functions_type`. */
#define REPROD_REAL_TABLE(name, functions_type, LIST, find)                                        \
    static const char *const name##_symbols[] = {LIST(REPROD_REAL_SYMBOL)};                        \
    _Static_assert(sizeof(functions_type) ==                                                       \
                       sizeof name##_symbols / sizeof(char *) * sizeof(void *),                    \
                   #functions_type ": one function pointer per entry of " #LIST);                  \
    static struct {                                                                                \
        functions_type functions;                                                                  \
        struct reprod_real_table table;                                                            \
    } name = {.table = {name##_symbols, (int)REPROD_ARRAY_LENGTH(name##_symbols), find,            \
                        (void **)&name.functions, 0}}

/* The slot of `field` in table `name`. */
#define REPROD_REAL_INDEX(name, field)                                                             \
    ((int)(offsetof(__typeof__(name.functions), field) / sizeof(void *)))

/* The real function of `field` (NULL while not found). */
#define REPROD_REAL(name, field)                                                                   \
    ((__typeof__(name.functions.field))reprod_real_slot(&name.table,                               \
                                                        REPROD_REAL_INDEX(name, field)))

/* Every function of table `name`, looked up: a const pointer to its struct. */
#define REPROD_REAL_ALL(name)                                                                      \
    (reprod_real_complete_once(&name.table), (const __typeof__(name.functions) *)&name.functions)

/* A hook whose real `symbol` was not found: say so once (the hook then does what the library
 * would answer without the function, or nothing; it never calls through NULL, and derives no
 * seed that nothing would use). */
#define REPROD_REAL_MISSING(symbol)                                                                \
    do {                                                                                           \
        static atomic_flag warned_ = ATOMIC_FLAG_INIT;                                             \
        if (!atomic_flag_test_and_set(&warned_))                                                   \
            reprod_log(REPROD_LOG_WARN, "warning: %s: the real function was not found", symbol);   \
    } while (0)

/* Declare `variable`, the real function of `field` in table `name`; when it was not found,
 * REPROD_REAL_MISSING and return from the hook with the expression that follows (empty for a
 * void hook): every hook's one way to meet a missing function. */
#define REPROD_REAL_OR_RETURN(variable, name, field, ...)                                          \
    __typeof__(name.functions.field) variable = REPROD_REAL(name, field);                          \
    if (!variable) {                                                                               \
        REPROD_REAL_MISSING(name##_symbols[REPROD_REAL_INDEX(name, field)]);                       \
        return __VA_ARGS__;                                                                        \
    }

#endif /* REPROD_REAL_H */
