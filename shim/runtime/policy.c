/* policy.c: the one decision table (exact / ordered / pass-through): docs/design.md, Decisions. */
#include "runtime/policy.h"

#include "runtime/config.h"

/* The decision under `mode` (never audit: see reprod_decide). */
static void decide(enum reprod_mode mode, enum reprod_op_class op_class,
                   enum reprod_element_class element_class, struct reprod_decision *decision)
{
    decision->action = REPROD_ACTION_PASS;
    decision->reason = REPROD_PASS_UNSUPPORTED;
    decision->audit_action = REPROD_ACTION_PASS;
    if (mode == REPROD_MODE_OFF)
        decision->reason = REPROD_PASS_MODE_OFF;
    else if (op_class == REPROD_OPCLASS_DETERMINISTIC)
        decision->reason = REPROD_PASS_DETERMINISTIC_OP;
    else if (op_class == REPROD_OPCLASS_USER)
        decision->action = REPROD_ACTION_ORDERED_LIBRARY;
    else if (element_class == REPROD_ELEMENT_NOT_FLOAT)
        decision->reason = REPROD_PASS_NON_FLOAT;
    else if (element_class == REPROD_ELEMENT_OTHER_FLOAT || op_class == REPROD_OPCLASS_PROD)
        decision->action = REPROD_ACTION_ORDERED_LIBRARY;
    /* A sum or an average of a type the engine knows. */
    else if (mode == REPROD_MODE_ORDERED)
        decision->action = REPROD_ACTION_ORDERED_ENGINE;
    else
        decision->action = REPROD_ACTION_EXACT;
    if (decision->action != REPROD_ACTION_PASS) decision->reason = 0;
}

void reprod_decide(enum reprod_op_class op_class, enum reprod_element_class element_class,
                   struct reprod_decision *decision)
{
    enum reprod_mode mode = reprod_config()->mode;
    decide(mode == REPROD_MODE_AUDIT ? REPROD_MODE_EXACT : mode, op_class, element_class,
           decision);
    if (mode != REPROD_MODE_AUDIT || decision->action == REPROD_ACTION_PASS) return;
    /* Audit: what exact mode would do, turned into a pass-through of the native call. */
    decision->audit_action =
        decision->action == REPROD_ACTION_EXACT ? REPROD_ACTION_EXACT : REPROD_ACTION_PASS;
    decision->action = REPROD_ACTION_PASS;
    decision->reason = REPROD_PASS_AUDIT;
}
