/* A stand-in for the part of libtorch_cuda.so that seeds CUDA generators, for tests on
 * machines without CUDA: at::CUDAGeneratorImpl::set_current_seed, ::set_state, ::clone_impl
 * and at::cuda::detail::createCUDAGenerator under their mangled names, with a vtable slot
 * filled by a relocation against the symbol, as in PyTorch (so an LD_PRELOADed definition takes
 * the slot), and set_state and createCUDAGenerator calling set_current_seed through it as
 * PyTorch 2.x does (aten/src/ATen/cuda/CUDAGeneratorImpl.cpp). clone_impl calls it directly
 * with the source's seed, as PyTorch 1.x to 2.2 do (`gen->set_current_seed(this->seed_)` on a
 * `new CUDAGeneratorImpl`, which a compiler may devirtualise into a call through the PLT). The
 * standin_* calls stand for libtorch_python's (torch.cuda.manual_seed, torch.cuda.set_rng_state,
 * Generator.clone, ...). Built with -DSTANDIN_HIDDEN_HELPERS, set_state, clone_impl and
 * createCUDAGenerator are not exported: a PyTorch whose callers of set_current_seed the shim
 * cannot find. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct generator;
typedef void (*set_seed_slot)(struct generator *, uint64_t);

struct generator {
    set_seed_slot *vtable;
    uint64_t seed;
    uint64_t philox_offset;
};

/* The state tensor's bytes: the seed, then the offset (CUDAGeneratorImpl::get_state). */
struct tensor_impl {
    unsigned char bytes[16];
};

#define DEFAULT_RNG_SEED_VAL UINT64_C(67280421310721) /* c10::detail::default_rng_seed_val */

#ifdef STANDIN_HIDDEN_HELPERS
#define HELPER __attribute__((visibility("hidden")))
#else
#define HELPER
#endif

void cuda_set_current_seed(struct generator *self,
                           uint64_t seed) __asm__("_ZN2at17CUDAGeneratorImpl16set_current_seedEm");
HELPER void cuda_set_state(struct generator *self, const struct tensor_impl *state) __asm__(
    "_ZN2at17CUDAGeneratorImpl9set_stateERKN3c1010TensorImplE");
HELPER struct generator *
cuda_create(signed char device) __asm__("_ZN2at4cuda6detail19createCUDAGeneratorEa");
HELPER struct generator *cuda_clone_impl(const struct generator *self) __asm__(
    "_ZNK2at17CUDAGeneratorImpl10clone_implEv"); /* CUDAGeneratorImpl::clone_impl() const */
struct generator *standin_generator(void);
void standin_manual_seed(struct generator *self, uint64_t seed);
void standin_set_rng_state(struct generator *self, uint64_t seed, uint64_t offset);
struct generator *standin_clone(const struct generator *self);
uint64_t standin_current_seed(const struct generator *self);

static set_seed_slot cuda_generator_vtable[] = {cuda_set_current_seed};

void cuda_set_current_seed(struct generator *self, uint64_t seed)
{
    self->seed = seed;
    self->philox_offset = 0;
}

void cuda_set_state(struct generator *self, const struct tensor_impl *state)
{
    uint64_t seed, offset;
    memcpy(&seed, state->bytes, sizeof seed);
    memcpy(&offset, state->bytes + 8, sizeof offset);
    self->vtable[0](self, seed); /* this->set_current_seed(input_seed): a virtual call */
    self->philox_offset = offset;
}

struct generator *cuda_create(signed char device)
{
    (void)device;
    struct generator *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->vtable = cuda_generator_vtable;
    self->vtable[0](self, DEFAULT_RNG_SEED_VAL);
    self->philox_offset = 0;
    return self;
}

/* A copy of the generator: its seed and offset (set_current_seed resets the offset first). */
struct generator *cuda_clone_impl(const struct generator *self)
{
    struct generator *clone = calloc(1, sizeof *clone);
    if (!clone) return NULL;
    clone->vtable = cuda_generator_vtable;
    cuda_set_current_seed(clone, self->seed); /* gen->set_current_seed(this->seed_) */
    clone->philox_offset = self->philox_offset;
    return clone;
}

/* torch.cuda.default_generators[0]: created once, then seeded by the user. Like PyTorch's, it
 * lives as long as the process (held here, so that a leak check does not count it). */
static struct generator *default_generator;

struct generator *standin_generator(void)
{
    if (default_generator == NULL) default_generator = cuda_create(0);
    return default_generator;
}

/* Generator.manual_seed: at::Generator::set_current_seed, inline: impl_->set_current_seed. */
void standin_manual_seed(struct generator *self, uint64_t seed)
{
    self->vtable[0](self, seed);
}

/* torch.cuda.set_rng_state: a CPU byte tensor with the seed and the offset. */
void standin_set_rng_state(struct generator *self, uint64_t seed, uint64_t offset)
{
    struct tensor_impl state;
    memcpy(state.bytes, &seed, sizeof seed);
    memcpy(state.bytes + 8, &offset, sizeof offset);
    cuda_set_state(self, &state);
}

uint64_t standin_current_seed(const struct generator *self)
{
    return self->seed;
}

/* CUDAGeneratorImpl::clone, the public wrapper (the owner frees the copy). */
struct generator *standin_clone(const struct generator *self)
{
    return cuda_clone_impl(self);
}
