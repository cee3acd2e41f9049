/* dlsym_next.c: dlsym(RTLD_NEXT, name) from the main program finds the first object after the
 * program, in load order, that defines `name`, with or without the shim's dlsym: for srand that
 * is the shim itself when it is preloaded (a dlsym that searched from the shim would find
 * libc's), for malloc libc's or a preloaded sanitizer's. dlsym(RTLD_DEFAULT, "nonexistent")
 * finds nothing. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

struct search {
    const char *name;
    int index;
    void *found;
};

/* The first object after the main program (index 0) that defines s->name itself. */
static int first_definition(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct search *s = data;
    if (s->index++ == 0 || s->found || !info->dlpi_name || !info->dlpi_name[0]) return 0;
    void *handle = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
    if (!handle) return 0;
    void *symbol = dlsym(handle, s->name);
    Dl_info where;
    if (symbol && dladdr(symbol, &where) && where.dli_fbase == (void *)info->dlpi_addr)
        s->found = symbol;
    dlclose(handle);
    return 0;
}

/* 0 when dlsym(RTLD_NEXT, name) is the next object's definition. */
static int check(const char *name)
{
    void *next = dlsym(RTLD_NEXT, name);
    struct search s = {name, 0, NULL};
    dl_iterate_phdr(first_definition, &s);
    Dl_info where;
    if (!next || next != s.found) {
        printf("dlsym(RTLD_NEXT, %s) = %p, the next object's = %p\n", name, next, s.found);
        return 1;
    }
    printf("RTLD_NEXT finds the next object's %s (%s); ", name,
           dladdr(next, &where) && where.dli_fname ? where.dli_fname : "?");
    return 0;
}

int main(void)
{
    if (check("malloc") || check("srand")) return 1;
    if (dlsym(RTLD_DEFAULT, "reprod_no_such_symbol")) {
        printf("found a symbol that does not exist\n");
        return 1;
    }
    printf("\n");
    return 0;
}
