/* torch.c: PyTorch's generators: at::CPUGeneratorImpl::set_current_seed and
 * at::CUDAGeneratorImpl::set_current_seed get the 64-bit seed of REPROD_SEED_POLICY.
 *
 * Why these two. torch.manual_seed, torch.Generator.manual_seed, torch.cuda.manual_seed(_all),
 * torch::manual_seed and Generator::seed() all end in the virtual GeneratorImpl::set_current_seed
 * of the generator's class; the at::Generator wrapper that calls it is inline. PyTorch's
 * libraries are linked without -Bsymbolic: the vtable slot is filled by a relocation against the
 * symbol (readelf -rW libtorch_cpu.so shows R_X86_64_64 _ZN2at16CPUGeneratorImpl16set_current_
 * seedEm in _ZTVN2at16CPUGeneratorImplE), so the preloaded definition below takes the slot, and
 * virtual calls reach it (tests/seed/seed_torch.sh proves it on torch 1.13). The mangled names are
 * the same in PyTorch 1.13 and 2.x (aten/src/ATen/CPUGeneratorImpl.cpp,
 * aten/src/ATen/cuda/CUDAGeneratorImpl.cpp). The real methods live in libtorch_cpu.so and
 * libtorch_cuda.so, loaded RTLD_LOCAL under Python: reprod_resolve walks the loaded objects.
 *
 * Three callers inside PyTorch pass a seed that is not the user's, and get it unchanged:
 * CUDAGeneratorImpl::set_state (torch.cuda.set_rng_state: restoring a saved seed must not
 * derive it again), CUDAGeneratorImpl::clone_impl (PyTorch 1.x to 2.2 copy a generator with
 * `gen->set_current_seed(this->seed_)`: the copy must run the source's stream, even when the
 * source's seed was restored rather than derived) and createCUDAGenerator (a new generator's
 * default seed, as the CPU generator's constructor sets its own without a call). They are
 * recognised by the return address lying inside them: no state is kept, so a C++ exception
 * unwinding through these frames (the default .eh_frame of x86-64 C code lets it) leaves
 * nothing behind. The CPU generator's clone_impl and set_state copy the engine without a call.
 * Any other caller's seed goes to reprod_seed_replace64, which keeps a seed the shim produced:
 * torch.manual_seed(torch.initial_seed()) keeps the stream of the first seeding.
 * When one of those three callers is not found (a PyTorch whose symbols differ, or hides them),
 * its seeds cannot be told from the user's, and deriving them would change a restored or copied
 * stream: every CUDA seed then passes unchanged, with one warning (the job runs as without the
 * shim).
 * Generator::seed() draws a seed from the OS and passes it here: it is derived like a user's,
 * so torch.manual_seed(torch.seed()) in a later run gives the same stream.
 */
#include "interpose/once.h"
#include "runtime/log.h"
#include "interpose/real.h"
#include "seed/seed.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>

#define CPU_SET_SEED  "_ZN2at16CPUGeneratorImpl16set_current_seedEm"
#define CUDA_SET_SEED "_ZN2at17CUDAGeneratorImpl16set_current_seedEm"
#define CUDA_SET_STATE                                                                             \
    "_ZN2at17CUDAGeneratorImpl9set_stateERKN3c1010TensorImplE"  /* set_state(TensorImpl&) */
#define CUDA_CLONE  "_ZNK2at17CUDAGeneratorImpl10clone_implEv"  /* clone_impl() const */
#define CUDA_CREATE "_ZN2at4cuda6detail19createCUDAGeneratorEa" /* (DeviceIndex = int8_t) */

/* The methods take `this` first (Itanium C++ ABI); void (GeneratorImpl *, uint64_t). */
typedef void (*set_seed_fn)(void *generator, uint64_t seed);

REPROD_EXPORT void reprod_torch_cpu_set_current_seed(void *generator,
                                                     uint64_t seed) __asm__(CPU_SET_SEED);
REPROD_EXPORT void reprod_torch_cuda_set_current_seed(void *generator,
                                                      uint64_t seed) __asm__(CUDA_SET_SEED);

/* The real methods, each looked up on its hook's first call (libtorch_cpu and libtorch_cuda),
 * and the callers whose seeds pass unchanged (only their code's place is used). */
/* clang-format off */
#define REAL_FUNCTIONS(X)                                                                          \
    X(cpu_set_seed, CPU_SET_SEED, set_seed_fn)                                                     \
    X(cuda_set_seed, CUDA_SET_SEED, set_seed_fn)                                                   \
    X(cuda_set_state, CUDA_SET_STATE, void (*)(void))                                              \
    X(cuda_clone, CUDA_CLONE, void (*)(void))                                                      \
    X(cuda_create, CUDA_CREATE, void (*)(void))
/* clang-format on */
struct torch_seeding {
    REPROD_REAL_FIELDS(REAL_FUNCTIONS)
};
REPROD_REAL_TABLE(real_functions, struct torch_seeding, REAL_FUNCTIONS, NULL);

/* Hand the seed to the real method, or say why it could not be. */
static void call_real(set_seed_fn real, const char *api, void *generator, uint64_t seed)
{
    if (real)
        real(generator, seed);
    else
        reprod_log(REPROD_LOG_WARN, "warning: %s: the real method was not found; seed not set",
                   api);
}

/* The code of one real function: [start, end). Empty when it is not loaded or not sized. */
struct code_range {
    uintptr_t start, end;
};

/* PyTorch's callers whose seeds pass unchanged, with the words for the log. */
static struct {
    int real; /* its slot in real_functions */
    const char *why;
    struct code_range range;
} unchanged_callers[] = {
    {REPROD_REAL_INDEX(real_functions, cuda_set_state),
     "restoring a saved state (CUDAGeneratorImpl::set_state)",
     {0, 0}},
    {REPROD_REAL_INDEX(real_functions, cuda_clone),
     "copying a generator (CUDAGeneratorImpl::clone_impl)",
     {0, 0}},
    {REPROD_REAL_INDEX(real_functions, cuda_create),
     "a new generator's default seed (createCUDAGenerator)",
     {0, 0}},
};
static struct reprod_once callers_once = REPROD_ONCE_INIT;
static int caller_not_found = -1; /* the first of them not found (or not sized), or -1 */

static void find_callers(void)
{
    caller_not_found = -1; /* run again in a fork child whose parent was running it */
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(unchanged_callers); i++) {
        void *address = reprod_real_slot(&real_functions.table, unchanged_callers[i].real);
        Dl_info info;
        const ElfW(Sym) *symbol = NULL;
        if (!address || !dladdr1(address, &info, (void **)&symbol, RTLD_DL_SYMENT) || !symbol ||
            !symbol->st_size) {
            if (caller_not_found < 0) caller_not_found = (int)i;
            continue;
        }
        unchanged_callers[i].range.start = (uintptr_t)address;
        unchanged_callers[i].range.end = (uintptr_t)address + symbol->st_size;
    }
}

/* Why the call returning to `return_address` keeps its seed, or NULL when it does not. */
static const char *unchanged_because(void *return_address)
{
    /* 0 only for a seed set from inside find_callers itself: nothing known yet, nothing derived. */
    if (!reprod_once(&callers_once, find_callers)) return "PyTorch's callers are being looked up";
    uintptr_t address = (uintptr_t)return_address;
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(unchanged_callers); i++)
        if (address >= unchanged_callers[i].range.start && address < unchanged_callers[i].range.end)
            return unchanged_callers[i].why;
    if (caller_not_found < 0) return NULL;
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&warned))
        reprod_log(REPROD_LOG_WARN,
                   "warning: at::CUDAGeneratorImpl::set_current_seed: %s was not found (the "
                   "caller for %s), so a restored or copied seed cannot be told from a new one: "
                   "CUDA generators' seeds pass unchanged",
                   real_functions_symbols[unchanged_callers[caller_not_found].real],
                   unchanged_callers[caller_not_found].why);
    return "PyTorch's callers were not all found";
}

__attribute__((noinline)) void reprod_torch_cpu_set_current_seed(void *generator, uint64_t seed)
{
    static const char api[] = "at::CPUGeneratorImpl::set_current_seed";
    set_seed_fn real = REPROD_REAL(real_functions, cpu_set_seed);
    call_real(real, api, generator, reprod_seed_replace64(api, seed));
}

__attribute__((noinline)) void reprod_torch_cuda_set_current_seed(void *generator, uint64_t seed)
{
    static const char api[] = "at::CUDAGeneratorImpl::set_current_seed";
    set_seed_fn real = REPROD_REAL(real_functions, cuda_set_seed);
    const char *why = unchanged_because(__builtin_return_address(0));
    uint64_t derived = seed;
    if (why)
        reprod_seed_note_unchanged(api, seed, why);
    else
        derived = reprod_seed_replace64(api, seed);
    call_real(real, api, generator, derived);
}
