/* dlsym_next.c: dlsym(RTLD_NEXT, "malloc") from the main program finds libc's malloc, and
 * dlsym(RTLD_DEFAULT, "nonexistent") finds nothing, with or without the shim's dlsym. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    void *next = dlsym(RTLD_NEXT, "malloc");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *real = libc ? dlsym(libc, "malloc") : NULL;
    if (!next || next != real) {
        printf("dlsym(RTLD_NEXT, malloc) = %p, libc's = %p\n", next, real);
        return 1;
    }
    if (dlsym(RTLD_DEFAULT, "reprod_no_such_symbol")) {
        printf("found a symbol that does not exist\n");
        return 1;
    }
    printf("RTLD_NEXT finds libc's malloc\n");
    return 0;
}
