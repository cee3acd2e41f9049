# reprod: build the preloadable shim, its tests and benchmarks.
#
#   make          build/libreprod_shim.so and build/reprod
#   make test     install missing Debian packages, build, run every test
#   make fuzz     run the engine fuzzer for long (FUZZ_ITERATIONS, FUZZ_SEED)
#   make bench    print the benchmark ratios
#   make demo     run the example job natively and under the shim

CC      ?= gcc
# Both MPI families are installed side by side: name each one's tools explicitly.
MPICC   ?= mpicc.openmpi
MPICC_MPICH ?= mpicc.mpich
MPIF90  ?= mpif90.openmpi
MPIF90_MPICH ?= mpif90.mpich
BUILD   := build

# -std=c11 (not gnu11) keeps floating-point contraction off; we also say it explicitly: an FMA
# formed by the compiler would change the engine's bits.
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
SANITIZE ?= # an instrumented build's -fsanitize flags (make test-sanitize, make test-tsan)
BASE     := -std=c11 -D_GNU_SOURCE -g -O2 -ffp-contract=off -fno-fast-math $(WARN) $(SANITIZE)
CFLAGS   ?=
# GCC on x86-64 clears or copies a fixed-size struct over 64 bytes with `rep stos`/`rep movs`,
# whose start-up alone costs a small reduction a tenth of its time (a 192-byte clear: 14 ns on
# AMD EPYC, 3.5 ns as vector stores): every MPI reduction clears one. Vector stores up to 256
# bytes, libc's memset and memcpy beyond. Left out where the compiler lacks the options.
STRINGOPS := -mmemset-strategy=vector_loop:256:noalign,libcall:-1:noalign \
             -mmemcpy-strategy=vector_loop:256:noalign,libcall:-1:noalign
STRINGOPS := $(shell $(CC) $(STRINGOPS) -Werror -x c -c /dev/null -o /dev/null 2>/dev/null && echo '$(STRINGOPS)')
SHIMFLAGS = $(BASE) $(STRINGOPS) -fPIC -fvisibility=hidden -Iinclude -Ishim $(CFLAGS)

# The MPI hooks include no mpi.h: each family's constants come from its own header, compiled
# into one file each (hooks/mpi_abi_openmpi.c, hooks/mpi_abi_mpich.c). Nothing links against
# either library. Without MPICH's headers the MPICH family is reported unsupported at run time.
OMPI_INC  := $(addprefix -I,$(shell $(MPICC) --showme:incdirs 2>/dev/null)) -DOMPI_SKIP_MPICXX=1
MPICH_INC := $(patsubst %,-I%,$(patsubst -I%,%,$(filter -I%,$(shell $(MPICC_MPICH) -show 2>/dev/null))))
MPICH_INC := $(if $(wildcard $(patsubst -I%,%,$(firstword $(MPICH_INC)))/mpi.h),$(MPICH_INC),-DREPROD_WITHOUT_MPICH_HEADERS)

# nvcc, when present, builds the device kernels (shim/cuda_kernels.cu) into a fatbin that the
# shim embeds (shim/cuda_image.S); `make NVCC=` builds a shim without them (host path only).
# -fmad=false -ftz=false -prec-div=true: the device computes as the host engine does.
NVCC      ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
NVCCFLAGS := -std=c++17 -O3 -fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Iinclude -Ishim
NVCC_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_100,code=sm_100 -gencode arch=compute_100,code=compute_100
KERNEL_SRC    := shim/cuda_kernels.cu shim/cuda_kernel.h shim/engine_inner.h shim/engine_round.h \
                 shim/engine_ordered.h include/reprod.h
KERNEL_FATBIN := $(BUILD)/cuda/reprod_kernels.fatbin
KERNEL_STAMP  := $(BUILD)/cuda/with_kernels # "yes" or "no": cuda_module.o follows a change
# What cuda_module.c tells about the kernels (REPROD_VERBOSE=1, and why they may not load): the
# toolkit's version as CUDA numbers it (13.0: 13000), the architectures built as machine code
# and as PTX.
comma := ,
NVCC_VERSION := $(if $(NVCC),$(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | awk '{ print $$1 * 1000 + $$2 * 10 }'))
KERNEL_SASS := $(patsubst code=sm_%,%,$(filter code=sm_%,$(subst $(comma), ,$(NVCC_ARCH))))
KERNEL_PTX  := $(patsubst code=compute_%,%,$(filter code=compute_%,$(subst $(comma), ,$(NVCC_ARCH))))

SHIM_SRC  := $(sort $(wildcard shim/*.c))
HOOK_SRC  := $(sort $(wildcard hooks/*.c))
SHIM_OBJ  := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o) $(if $(NVCC),$(BUILD)/obj/shim/cuda_image.o)
HOOK_OBJ  := $(HOOK_SRC:%.c=$(BUILD)/obj/%.o)

SHIM      := $(BUILD)/libreprod_shim.so
CORE      := $(BUILD)/libreprod_core.a
TOOL      := $(BUILD)/reprod

UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
MPI_SRC   := $(sort $(wildcard tests/mpi/*.c))
MPI_BIN   := $(MPI_SRC:tests/mpi/%.c=$(BUILD)/tests/mpi/%)
MPICH_BIN := $(MPI_SRC:tests/mpi/%.c=$(BUILD)/tests/mpich/%)
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
PROG_SRC  := $(sort $(wildcard tests/progs/*.c))
PROG_BIN  := $(filter-out $(BUILD)/tests/progs/failalloc,$(PROG_SRC:tests/progs/%.c=$(BUILD)/tests/progs/%)) \
             $(BUILD)/tests/progs/libfailalloc.so
STANDIN_SRC := $(sort $(wildcard tests/standins/*.c))
STANDIN_LIB := $(STANDIN_SRC:tests/standins/%.c=$(BUILD)/tests/standins/lib%.so)
# NCCL test programs (tests/nccl/): ordinary NCCL + MPI programs built against the real
# headers and linked with the stand-ins of build/standins/ (run with LD_LIBRARY_PATH there).
CUDA_INC  ?= /usr/local/cuda/include
NCCL_PROGS := $(filter-out loaders nccl_user namespaces,$(basename $(notdir $(wildcard tests/nccl/*.c))))
NCCL_BIN  := $(NCCL_PROGS:%=$(BUILD)/tests/nccl/%) $(BUILD)/tests/nccl/loaders_linked \
             $(BUILD)/tests/nccl/loaders_dynamic $(BUILD)/tests/nccl/libnccl_user.so \
             $(BUILD)/tests/nccl/namespaces
# With nvcc, a second shim built without it: its host path must give the same bits.
NONVCC_SHIM = $(if $(NVCC),$(BUILD)/nonvcc/libreprod_shim.so)
FORTRAN_BIN := $(foreach family,openmpi mpich,$(foreach binding,mpi f08,$(BUILD)/tests/fortran/$(family)/sum_$(binding)))
FUZZ_BIN  := $(BUILD)/tests/fuzz_engine
# Host-memory stand-ins for CUDA and NCCL (tests/standins_nccl/): what NCCL test programs link
# and run against on a machine without a GPU. Never part of the shim.
STANDINS  := $(BUILD)/standins
NCCL_STANDIN_LIBS := $(STANDINS)/libcuda.so.1 $(STANDINS)/libcudart.so.13 $(STANDINS)/libcudart.so.12 \
             $(STANDINS)/libcudart.so $(STANDINS)/libnccl.so.2 $(STANDINS)/libnccl.so
TEST_BIN  = $(UNIT_BIN) $(FUZZ_BIN) $(MPI_BIN) $(MPICH_BIN) $(FORTRAN_BIN) $(PROG_BIN) $(STANDIN_LIB) \
            $(NCCL_STANDIN_LIBS) $(STANDINS_WITHOUT) $(NCCL_BIN) $(NONVCC_SHIM)
EX_SRC    := $(sort $(wildcard examples/*.c))
EX_BIN    := $(EX_SRC:examples/%.c=$(BUILD)/examples/%)

.PHONY: all test test-unit test-scripts fuzz instrumented test-sanitize test-tsan bench demo deps clean
.PHONY: gpu-tests test-gpu
.PHONY: format

all: $(SHIM) $(TOOL)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(SHIMFLAGS) -MMD -MP -c $< -o $@

# dlsym(RTLD_NEXT) must reach glibc as a tail call from the shim's dlsym, with the caller's
# return address in place; and ASan's start-up calls dlsym before its shadow memory exists.
$(BUILD)/obj/hooks/dlsym.o $(BUILD)/obj/shim/glibc_dlsym.o: SHIMFLAGS += -fno-sanitize=all -foptimize-sibling-calls
$(BUILD)/obj/hooks/mpi_abi_openmpi.o: SHIMFLAGS += $(OMPI_INC)
# The engine's kernels are tight loops of a few dozen instructions whose speed moved by 5-15%
# with where the code around them happened to put them; aligned to 64 bytes, it does not.
$(BUILD)/obj/shim/engine%.o: SHIMFLAGS += -falign-loops=64

# The kernels: rebuilt only when their sources change (nvcc is slow). ptxas reports each
# architecture's stack frame; tests/gpu/kernel_limits.sh fails the build when one exceeds CUDA's
# default 1 KiB a thread or when no PTX is embedded (make test-gpu prints what it found).
$(KERNEL_FATBIN): $(KERNEL_SRC) tests/gpu/kernel_limits.sh
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Xptxas -v -fatbin shim/cuda_kernels.cu -o $@.tmp \
	    2>$(BUILD)/cuda/ptxas.log || { cat $(BUILD)/cuda/ptxas.log; rm -f $@.tmp; exit 1; }
	sh tests/gpu/kernel_limits.sh $(BUILD)/cuda/ptxas.log $@.tmp >$(BUILD)/cuda/kernel_limits.txt \
	    || { cat $(BUILD)/cuda/kernel_limits.txt; rm -f $@.tmp; exit 1; }
	@cat $(BUILD)/cuda/kernel_limits.txt
	mv $@.tmp $@

$(BUILD)/obj/shim/cuda_image.o: shim/cuda_image.S $(KERNEL_FATBIN)
	@mkdir -p $(dir $@)
	$(CC) -c -DREPROD_FATBIN='"$(KERNEL_FATBIN)"' $< -o $@

$(KERNEL_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo $(if $(NVCC),yes,no) | cmp -s - $@ || echo $(if $(NVCC),yes,no) > $@

$(BUILD)/obj/shim/cuda_module.o: $(KERNEL_STAMP)
$(BUILD)/obj/shim/cuda_module.o: SHIMFLAGS += $(if $(NVCC),-DREPROD_HAVE_KERNELS \
    -DREPROD_KERNEL_CUDA_VERSION=$(or $(NVCC_VERSION),0) -DREPROD_KERNEL_SASS='"$(KERNEL_SASS)"' \
    -DREPROD_KERNEL_PTX='"$(KERNEL_PTX)"')

.PHONY: FORCE
FORCE:
$(BUILD)/obj/hooks/mpi_abi_mpich.o: SHIMFLAGS += $(MPICH_INC)

# -z defs: every symbol the shim uses must come from libc, libdl, libpthread or libm; MPI,
# NCCL, CUDA and PyTorch are reached through dlsym at run time only.
$(SHIM): $(SHIM_OBJ) $(HOOK_OBJ) shim/exports.map
	$(CC) $(SANITIZE) -shared -Wl,-z,defs -Wl,--version-script=shim/exports.map -Wl,-soname,libreprod_shim.so \
	    -o $@ $(SHIM_OBJ) $(HOOK_OBJ) -ldl -lpthread -lm

# The mechanisms without the hooks, for unit tests that exercise internal functions.
$(CORE): $(SHIM_OBJ)
	@rm -f $@
	ar rcs $@ $^

TOOL_SRC := $(sort $(wildcard tools/*.c))
$(TOOL): $(TOOL_SRC) $(wildcard tools/*.h) $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim $(CFLAGS) $(TOOL_SRC) -o $@ $(CORE) -ldl -lpthread -lm

$(BUILD)/tests/test_%: tests/unit/test_%.c $(CORE) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim -Itests/unit $(CFLAGS) $< $(UNIT_EXTRA) -o $@ $(CORE) -lcriterion -lmpfr -lgmp -ldl -lpthread -lm

# The kernel's unit test also checks the stand-in libcuda's host build of the kernels.
$(BUILD)/tests/test_cuda_kernel: tests/standins_nccl/kernels.c tests/standins_nccl/kernels.h \
    shim/cuda_kernel.h shim/engine_ordered.h shim/engine_inner.h shim/engine_round.h
$(BUILD)/tests/test_cuda_kernel: UNIT_EXTRA = tests/standins_nccl/kernels.c

# The engine's fuzzer against MPFR (tests/fuzz_engine.c; make fuzz).
$(BUILD)/tests/fuzz_engine: tests/fuzz_engine.c tests/fuzz_inputs.h $(CORE) tests/unit/engine_oracle.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim -Itests/unit $(CFLAGS) $< -o $@ $(CORE) -lmpfr -lgmp -ldl -lpthread -lm

# Plain test programs (no shim, no MPI): what a preloaded process looks like from inside.
$(BUILD)/tests/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude $(CFLAGS) $< -o $@ -ldl -lpthread -lm

# A preload library that fails the shim's large allocations on one rank (tests/mpi_hostile.sh).
$(BUILD)/tests/progs/libfailalloc.so: tests/progs/failalloc.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(CFLAGS) $< -o $@ -ldl

# Host-memory stand-ins for libraries a test machine lacks (libnccl, libcurand): used only by
# tests, loaded RTLD_LOCAL by the test programs as the real frameworks do.
$(BUILD)/tests/standins/lib%.so: tests/standins/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(CFLAGS) $< -o $@ -lm

# The CUDA and NCCL stand-ins. The CUDA headers come in with -isystem: nccl.h declares
# ncclGroupStart() without a prototype, which -Wstrict-prototypes would refuse. libcudart and
# libnccl call into libcuda.so.1 (one set of streams and allocations) and find it beside them.
# STANDIN_KERNEL_SRC: the host builds of the shim's kernels (kernels.h), linked into libcuda.
STANDIN_KERNEL_SRC ?= tests/standins_nccl/kernels.c
STANDIN_CFLAGS = $(BASE) -fPIC -shared -isystem $(CUDA_INC) -Itests/standins_nccl $(CFLAGS)
STANDIN_CUDA_SRC := $(filter-out %/cuda_runtime.c,$(wildcard tests/standins_nccl/cuda_*.c))
STANDIN_NCCL_SRC := $(wildcard tests/standins_nccl/nccl_*.c)
STANDIN_HEADERS := $(wildcard tests/standins_nccl/*.h)

# The kernels' host build includes the shim's headers (shim/cuda.h would hide CUDA's cuda.h
# from the other stand-in files): an object of its own.
$(STANDINS)/kernels.o: $(STANDIN_KERNEL_SRC) tests/standins_nccl/kernels.h shim/cuda_kernel.h \
    shim/engine_ordered.h shim/engine_inner.h shim/engine_round.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -Itests/standins_nccl -Ishim -Iinclude $(CFLAGS) -c $(STANDIN_KERNEL_SRC) -o $@

$(STANDINS)/libcuda.so.1: $(STANDIN_CUDA_SRC) $(STANDINS)/kernels.o $(STANDIN_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(STANDIN_CFLAGS) -Wl,-soname,libcuda.so.1 -o $@ $(filter %.c %.o,$^) -lpthread -lm

$(STANDINS)/libcudart.so.%: tests/standins_nccl/cuda_runtime.c $(STANDINS)/libcuda.so.1 $(STANDIN_HEADERS)
	$(CC) $(STANDIN_CFLAGS) -Wl,-soname,libcudart.so.$* -Wl,-rpath,'$$ORIGIN' -o $@ $< \
	    -L$(STANDINS) -l:libcuda.so.1 -lpthread

$(STANDINS)/libcudart.so: $(STANDINS)/libcudart.so.13
	ln -sf libcudart.so.13 $@

$(STANDINS)/libnccl.so.2: $(STANDIN_NCCL_SRC) $(STANDINS)/libcuda.so.1 $(STANDIN_HEADERS)
	$(CC) $(STANDIN_CFLAGS) -Wl,-soname,libnccl.so.2 -Wl,-rpath,'$$ORIGIN' -o $@ $(filter %.c,$^) \
	    -L$(STANDINS) -l:libcuda.so.1 -lpthread -lrt -lm

$(STANDINS)/libnccl.so: $(STANDINS)/libnccl.so.2
	ln -sf libnccl.so.2 $@

# Stand-ins of an older library that lacks one function the shim wants (tests/nccl_device.sh),
# one directory each, put before build/standins in LD_LIBRARY_PATH: the same sources with the
# symbol made local (and left out of libcuda's cuGetProcAddress too).
CUDA_WITHOUT := cuMemAllocAsync cuMemPoolTrimTo
NCCL_WITHOUT := ncclCommCuDevice ncclSend ncclRedOpCreatePreMulSum
STANDINS_WITHOUT := $(CUDA_WITHOUT:%=$(STANDINS)/without-%/libcuda.so.1) \
                    $(NCCL_WITHOUT:%=$(STANDINS)/without-%/libnccl.so.2)

$(STANDINS)/without-%/libcuda.so.1: $(STANDIN_CUDA_SRC) $(STANDINS)/kernels.o $(STANDIN_HEADERS)
	@mkdir -p $(dir $@)
	printf '{ local: %s; };\n' $* >$(dir $@)local.map
	$(CC) $(STANDIN_CFLAGS) -DSTANDIN_CUDA_WITHOUT='"$*"' -Wl,--version-script=$(dir $@)local.map \
	    -Wl,-soname,libcuda.so.1 -o $@ $(filter %.c %.o,$^) -lpthread -lm

$(STANDINS)/without-%/libnccl.so.2: $(STANDIN_NCCL_SRC) $(STANDINS)/libcuda.so.1 $(STANDIN_HEADERS)
	@mkdir -p $(dir $@)
	printf '{ local: %s; p%s; };\n' $* $* >$(dir $@)local.map
	$(CC) $(STANDIN_CFLAGS) -Wl,--version-script=$(dir $@)local.map -Wl,-soname,libnccl.so.2 \
	    -o $@ $(filter %.c,$^) -L$(STANDINS) -l:libcuda.so.1 -lpthread -lrt -lm

# Test programs are ordinary MPI programs: they do not know about the shim. Each is built
# against both families: build/tests/mpi/ (Open MPI) and build/tests/mpich/ (MPICH).
$(BUILD)/tests/mpi/%: tests/mpi/%.c $(wildcard tests/mpi/*.h)
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) -Itests/mpi $(CFLAGS) $< -o $@ -lmpfr -lgmp -lpthread -lm

$(BUILD)/tests/mpich/%: tests/mpi/%.c $(wildcard tests/mpi/*.h)
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(BASE) -Wno-stringop-overflow -Itests/mpi $(CFLAGS) $< -o $@ -lmpfr -lgmp -lpthread -lm

# NCCL test programs: ordinary MPI + NCCL programs, run by the scripts with
# LD_LIBRARY_PATH=build/standins. (-isystem: nccl.h declares ncclGroupStart() unprototyped.)
NCCL_TEST_FLAGS = -isystem $(CUDA_INC) -Itests/nccl -Itests/unit -Iinclude
NCCL_TEST_LIBS  = -L$(BUILD)/standins -lnccl -lcudart

$(BUILD)/tests/nccl/%: tests/nccl/%.c $(wildcard tests/nccl/*.h) tests/unit/engine_oracle.h $(NCCL_STANDIN_LIBS)
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) $(NCCL_TEST_FLAGS) $(CFLAGS) $< -o $@ $(NCCL_TEST_LIBS) -lmpfr -lgmp -lpthread -lm

$(BUILD)/tests/nccl/loaders_linked: tests/nccl/loaders.c tests/nccl/loaders_api.h $(NCCL_STANDIN_LIBS)
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) -DLINKED $(NCCL_TEST_FLAGS) $(CFLAGS) $< -o $@ $(NCCL_TEST_LIBS) -lmpfr -lgmp -ldl -lm

# Without -lnccl: NCCL comes through dlopen only (the RTLD_LOCAL library, or dlsym).
$(BUILD)/tests/nccl/loaders_dynamic: tests/nccl/loaders.c tests/nccl/loaders_api.h $(NCCL_STANDIN_LIBS)
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) $(NCCL_TEST_FLAGS) $(CFLAGS) $< -o $@ -L$(BUILD)/standins -lcudart -lmpfr -lgmp -ldl -lm

# libnccl only in a link-map namespace of its own (dlmopen): nothing of NCCL or CUDA linked.
$(BUILD)/tests/nccl/namespaces: tests/nccl/namespaces.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $< -o $@ -ldl

$(BUILD)/tests/nccl/libnccl_user.so: tests/nccl/nccl_user.c tests/nccl/loaders_api.h $(NCCL_STANDIN_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(NCCL_TEST_FLAGS) $(CFLAGS) $< -o $@ $(NCCL_TEST_LIBS)

$(BUILD)/nonvcc/libreprod_shim.so: $(SHIM_SRC) $(HOOK_SRC) $(wildcard shim/*.h hooks/*.h)
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/nonvcc NVCC= $@

# Fortran test programs, `use mpi` and `use mpi_f08`, for each family (its own mpif90 and
# module files), with the MPFR oracle in C.
$(BUILD)/tests/fortran/oracle.o: tests/fortran/oracle.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -c $< -o $@

define FORTRAN_RULES
$(BUILD)/tests/fortran/$(1)/test_data.o: tests/fortran/test_data.f90
	@mkdir -p $$(dir $$@)
	$(2) -O2 -J$$(dir $$@) -c $$< -o $$@

$(BUILD)/tests/fortran/$(1)/sum_mpi: tests/fortran/sum.F90 $(BUILD)/tests/fortran/$(1)/test_data.o $(BUILD)/tests/fortran/oracle.o
	$(2) -O2 -cpp -I$$(dir $$@) $$< $$(filter %.o,$$^) -o $$@ -lmpfr -lgmp

$(BUILD)/tests/fortran/$(1)/sum_f08: tests/fortran/sum.F90 $(BUILD)/tests/fortran/$(1)/test_data.o $(BUILD)/tests/fortran/oracle.o
	$(2) -O2 -cpp -DUSE_F08 -I$$(dir $$@) $$< $$(filter %.o,$$^) -o $$@ -lmpfr -lgmp
endef
$(eval $(call FORTRAN_RULES,openmpi,$(MPIF90)))
$(eval $(call FORTRAN_RULES,mpich,$(MPIF90_MPICH)))

$(BUILD)/bench/bench_mpi%: bench/bench_mpi%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) -O3 $(CFLAGS) $< -o $@ -lm

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O3 -Iinclude -Ishim $(CFLAGS) $< -o $@ $(CORE) -ldl -lpthread -lm

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) $(CFLAGS) $< -o $@ -lm

# The device checks against the real driver (tests/gpu/): built here, run on a GPU machine.
GPU_TEST_BIN := $(BUILD)/tests/gpu/check_kernels
$(BUILD)/tests/gpu/%: tests/gpu/%.c $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim $(CFLAGS) $< -o $@ $(CORE) -ldl -lpthread -lm

gpu-tests: $(GPU_TEST_BIN)

test-gpu: all $(GPU_TEST_BIN)
	@BUILD=$(BUILD) tests/gpu/run.sh

deps:
	@tools/install-deps

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@tools/run-tests

# One group: `make test-unit`, `make test-scripts`, or a single script with
# `make test-scripts ONLY=tests/mpi_exactness.sh`.
test-unit test-scripts: all $(TEST_BIN)
	@tools/run-tests $(@:test-%=%) $(ONLY)

# The engine fuzzer for long: `make fuzz`, `make fuzz FUZZ_ITERATIONS=1000000 FUZZ_SEED=42`
# (a random seed by default; the fuzzer prints it, and a failure prints the command to replay).
FUZZ_ITERATIONS ?= 100000
FUZZ_SEED       ?= $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
	$(FUZZ_BIN) $(FUZZ_ITERATIONS) $(FUZZ_SEED)

# Sanitizer builds: the shim, its core, the unit tests and the fuzzer instrumented, each
# build in a directory of its own; the programs the test scripts start stay plain (they stand
# for the unmodified job). `make test-sanitize ONLY=tests/trace.sh` runs one script.
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer

instrumented: $(SHIM) $(UNIT_BIN) $(FUZZ_BIN) $(BUILD)/tests/libkeep_loaded.so

$(BUILD)/tests/libkeep_loaded.so: tests/sanitize/keep_loaded.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(CFLAGS) $< -o $@

test-sanitize: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/sanitize SANITIZE="$(ASAN_FLAGS)" instrumented
	@tools/run-sanitize address $(BUILD)/sanitize $(ONLY)

# Criterion cannot start under ThreadSanitizer (its arena lies where TSan keeps its shadow:
# Criterion issue #274), so the TSan build is the shim and the fuzzer only.
test-tsan: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan SANITIZE="$(TSAN_FLAGS)" \
	    $(BUILD)/tsan/libreprod_shim.so $(BUILD)/tsan/tests/fuzz_engine
	@tools/run-sanitize thread $(BUILD)/tsan

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BIN)
	@tools/run-bench

demo: deps
	@$(MAKE) --no-print-directory all $(EX_BIN)
	@tools/run-demo

format:
	clang-format -i include/*.h shim/*.[ch] hooks/*.[ch] tests/unit/*.[ch] tests/mpi/*.[ch] bench/*.c tools/*.c

clean:
	rm -rf $(BUILD)

-include $(SHIM_OBJ:.o=.d) $(HOOK_OBJ:.o=.d)
