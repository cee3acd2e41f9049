/* resolve.h: find the real definition of an intercepted symbol.
 *
 * dlsym(RTLD_NEXT) finds only libraries in the global scope; MPI loaded by mpi4py and NCCL
 * loaded by PyTorch are RTLD_LOCAL, so when it fails we walk every loaded object.
 */
#ifndef REPROD_RESOLVE_H
#define REPROD_RESOLVE_H

/* The address of `name` in a loaded object other than the shim, or NULL if none defines it.
 * Safe to call from several threads, before the constructor and in a fork child: it holds no
 * lock of its own, and allocates only by mmap and inside the dynamic loader's own calls. */
void *reprod_resolve(const char *name);

/* The address of the data object `name` as the process uses it. An executable that refers to
 * a library's variable (Open MPI's ompi_mpi_comm_world behind MPI_COMM_WORLD) usually holds a
 * copy of it (a copy relocation) that the library itself then uses too: the global scope finds
 * that copy first; the walk finds variables of RTLD_LOCAL libraries, which have no copy. */
void *reprod_resolve_data(const char *name);

/* glibc's dlsym: the shim exports a dlsym of its own (hooks/nccl/dlsym.c), which its own lookups
 * must not go through. */
typedef void *reprod_dlsym_function(void *handle, const char *name);
reprod_dlsym_function *reprod_glibc_dlsym(void);

/* glibc's dlsym(handle, name), called from the shim (RTLD_NEXT: the objects after the shim). */
void *reprod_dlsym(void *handle, const char *name);

#endif /* REPROD_RESOLVE_H */
