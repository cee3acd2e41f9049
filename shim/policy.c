/* policy.c: the one table of DESIGN.md section 3 (exact / ordered / pass-through). */
#include "policy.h"

#include "config.h"

/* The decision under `mode` (never audit: see reprod_decide). */
static struct reprod_decision decide(enum reprod_mode mode, enum reprod_op_class op_class,
                                     enum reprod_element_class element_class)
{
    struct reprod_decision pass = {REPROD_ACTION_PASS, REPROD_PASS_UNSUPPORTED, 0};
    if (mode == REPROD_MODE_OFF) {
        pass.reason = REPROD_PASS_MODE_OFF;
        return pass;
    }
    if (op_class == REPROD_OPCLASS_DETERMINISTIC) {
        pass.reason = REPROD_PASS_DETERMINISTIC_OP;
        return pass;
    }
    if (op_class == REPROD_OPCLASS_USER)
        return (struct reprod_decision){REPROD_ACTION_ORDERED_LIBRARY, 0, 0};
    if (element_class == REPROD_ELEMENT_NOT_FLOAT) {
        pass.reason = REPROD_PASS_NON_FLOAT;
        return pass;
    }
    if (element_class == REPROD_ELEMENT_OTHER_FLOAT || op_class == REPROD_OPCLASS_PROD)
        return (struct reprod_decision){REPROD_ACTION_ORDERED_LIBRARY, 0, 0};
    /* A sum or an average of a type the engine knows. */
    if (mode == REPROD_MODE_ORDERED)
        return (struct reprod_decision){REPROD_ACTION_ORDERED_ENGINE, 0, 0};
    return (struct reprod_decision){REPROD_ACTION_EXACT, 0, 0};
}

struct reprod_decision reprod_decide(enum reprod_op_class op_class,
                                     enum reprod_element_class element_class)
{
    enum reprod_mode mode = reprod_config()->mode;
    if (mode != REPROD_MODE_AUDIT) return decide(mode, op_class, element_class);
    /* Audit: what exact mode would do, turned into a pass-through of the native call. */
    struct reprod_decision exact = decide(REPROD_MODE_EXACT, op_class, element_class);
    if (exact.action == REPROD_ACTION_PASS) return exact;
    enum reprod_action audit =
        exact.action == REPROD_ACTION_EXACT ? REPROD_ACTION_EXACT : REPROD_ACTION_PASS;
    return (struct reprod_decision){REPROD_ACTION_PASS, REPROD_PASS_AUDIT, audit};
}
