/* real.c: the one place that fills the real-function tables of real.h. */
#include "interpose/real.h"

void *reprod_real_lookup(struct reprod_real_table *table, int index)
{
    void **slot = &table->functions[index];
    if (atomic_load_explicit(&table->complete, memory_order_acquire))
        return __atomic_load_n(slot, __ATOMIC_ACQUIRE); /* a NULL one is missing for good */
    const char *symbol = table->symbols[index];
    void *found = table->find ? table->find(symbol) : reprod_resolve(symbol);
    if (!found) return NULL;
    /* Threads that race here found the same address: the first store stands. */
    void *stored = NULL;
    if (__atomic_compare_exchange_n(slot, &stored, found, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return found;
    return stored;
}

void reprod_real_complete(struct reprod_real_table *table)
{
    for (int i = 0; i < table->count; i++)
        reprod_real_slot(table, i);
    atomic_store_explicit(&table->complete, 1, memory_order_release);
}
