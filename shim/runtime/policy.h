/* policy.h: what to do with one intercepted reduction, decided the same way for every API
 * family (MPI now, NCCL later): which operation on which kind of element, under REPROD_MODE. */
#ifndef REPROD_POLICY_H
#define REPROD_POLICY_H

#include "reprod.h"
#include "runtime/stats.h"

/* The operation, as far as determinism is concerned. */
enum reprod_op_class {
    REPROD_OPCLASS_SUM = 0,       /* sum (and NCCL's average): exact in exact mode */
    REPROD_OPCLASS_AVG,           /* average: exact sum / N */
    REPROD_OPCLASS_PROD,          /* product: order matters, no exact engine: ordered */
    REPROD_OPCLASS_USER,          /* user-defined: ordered, in every mode */
    REPROD_OPCLASS_DETERMINISTIC, /* max, min, logical, bitwise, loc, replace, no-op */
};

/* The element, as far as determinism is concerned. */
enum reprod_element_class {
    REPROD_ELEMENT_ENGINE_FLOAT = 0, /* a float type the engine reduces (maybe complex) */
    REPROD_ELEMENT_OTHER_FLOAT,      /* holds floats the engine does not (long double, derived) */
    REPROD_ELEMENT_NOT_FLOAT,        /* integers, bytes, booleans, pairs for loc ops */
};

/* The decision. */
enum reprod_action {
    REPROD_ACTION_PASS = 0,        /* hand the call to the real library; see reason */
    REPROD_ACTION_EXACT,           /* the engine's exact sum */
    REPROD_ACTION_ORDERED_ENGINE,  /* the engine's ordered fold */
    REPROD_ACTION_ORDERED_LIBRARY, /* fold in rank order with the library's local reduction */
};

struct reprod_decision {
    enum reprod_action action;
    enum reprod_reason reason; /* why, when action is REPROD_ACTION_PASS */
    /* REPROD_MODE=audit: the action is PASS (native result, reason REPROD_PASS_AUDIT) and this
     * says whether a hook able to audit may compute the exact sum beside it (EXACT), or not
     * (PASS: products, user ops and other types have no exact sum to compare with). */
    enum reprod_action audit_action;
};

/* Decide for an operation of `op_class` on elements of `element_class` under the process's
 * REPROD_MODE, into *decision. In audit mode a call exact mode would make deterministic is
 * passed through (the job gets the native result) with audit_action set. Structural reasons
 * to pass (intercommunicator, empty, bad arguments) are the caller's to check first. (Filled
 * in place, not returned: GCC returns this 12-byte struct through narrow stores and a wide load
 * that stalls; perf put that at a tenth of a small MPI reduction's time in the shim.) */
void reprod_decide(enum reprod_op_class op_class, enum reprod_element_class element_class,
                   struct reprod_decision *decision);

#endif /* REPROD_POLICY_H */
