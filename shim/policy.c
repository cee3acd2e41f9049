/* policy.c: the one table of DESIGN.md section 3 (exact / ordered / pass-through). */
#include "policy.h"

#include "config.h"

struct reprod_decision reprod_decide(enum reprod_op_class op_class,
                                     enum reprod_element_class element_class)
{
    const struct reprod_config *config = reprod_config();
    struct reprod_decision pass = {REPROD_ACTION_PASS, REPROD_PASS_UNSUPPORTED};
    if (config->mode == REPROD_MODE_OFF) {
        pass.reason = REPROD_PASS_MODE_OFF;
        return pass;
    }
    if (op_class == REPROD_OPCLASS_DETERMINISTIC) {
        pass.reason = REPROD_PASS_DETERMINISTIC_OP;
        return pass;
    }
    if (op_class == REPROD_OPCLASS_USER)
        return (struct reprod_decision){REPROD_ACTION_ORDERED_LIBRARY, 0};
    if (element_class == REPROD_ELEMENT_NOT_FLOAT) {
        pass.reason = REPROD_PASS_NON_FLOAT;
        return pass;
    }
    if (element_class == REPROD_ELEMENT_OTHER_FLOAT || op_class == REPROD_OPCLASS_PROD)
        return (struct reprod_decision){REPROD_ACTION_ORDERED_LIBRARY, 0};
    /* A sum or an average of a type the engine knows. */
    if (config->mode == REPROD_MODE_ORDERED)
        return (struct reprod_decision){REPROD_ACTION_ORDERED_ENGINE, 0};
    return (struct reprod_decision){REPROD_ACTION_EXACT, 0};
}
