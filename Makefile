# reprod: build the preloadable shim, its tests and benchmarks.
#
#   make          build/libreprod_shim.so and build/reprod
#   make test     install missing Debian packages, build, run every test
#   make fuzz     run the engine fuzzer for long (FUZZ_ITERATIONS, FUZZ_SEED)
#   make bench    print the benchmark ratios and the cost model's table (build/cost-model.png)
#   make demo     run the example job natively and under the shim
#   make readme   write the table of settings into README.md

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
SHIMFLAGS = $(BASE) $(STRINGOPS) -fPIC -fvisibility=hidden -Iinclude -Ishim -Ihooks $(CFLAGS)

# The MPI hooks include no mpi.h: each family's constants come from its own header, compiled
# into one file each (hooks/mpi/abi/mpi_abi_openmpi.c, hooks/mpi/abi/mpi_abi_mpich.c), which refuses any other
# family's mpi.h. Nothing links against either library. MPI_FAMILIES names the families the
# shim is built for; each needs its headers (found through its mpicc), and a family left out
# is reported unsupported at run time, its jobs passed through unchanged, logged:
# `make MPI_FAMILIES=mpich` builds without Open MPI's headers, `MPI_FAMILIES=openmpi` without
# MPICH's. (`MPI_FAMILIES=` builds a shim for NCCL and the seeding calls only.)
MPI_FAMILIES ?= openmpi mpich
OMPI_INC_DIRS  := $(shell $(MPICC) --showme:incdirs 2>/dev/null)
OMPI_HEADER    := $(firstword $(wildcard $(addsuffix /mpi.h,$(OMPI_INC_DIRS))))
MPICH_INC_DIRS := $(patsubst -I%,%,$(filter -I%,$(shell $(MPICC_MPICH) -show 2>/dev/null)))
MPICH_HEADER   := $(firstword $(wildcard $(addsuffix /mpi.h,$(MPICH_INC_DIRS))))
OMPI_INC  := $(if $(filter openmpi,$(MPI_FAMILIES)),$(addprefix -I,$(OMPI_INC_DIRS)) -DOMPI_SKIP_MPICXX=1,-DREPROD_WITHOUT_OPENMPI_HEADERS)
MPICH_INC := $(if $(filter mpich,$(MPI_FAMILIES)),$(addprefix -I,$(MPICH_INC_DIRS)),-DREPROD_WITHOUT_MPICH_HEADERS)

# nvcc, when present, builds the device kernels (shim/device/cuda_kernels.cu) into a fatbin that the
# shim embeds (shim/device/cuda_image.S); `make NVCC=` builds a shim without them (host path only).
# -fmad=false -ftz=false -prec-div=true: the device computes as the host engine does.
NVCC      ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
NVCCFLAGS := -std=c++17 -O3 -fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Iinclude -Ishim -Ihooks
NVCC_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_100,code=sm_100 -gencode arch=compute_100,code=compute_100
KERNEL_SRC    := shim/device/cuda_kernels.cu shim/device/cuda_kernel.h shim/device/cuda_kernel_fixed.h shim/engine/engine_fixed.h shim/engine/engine_inner.h shim/engine/engine_round.h \
                 shim/engine/engine_ordered.h include/reprod.h
KERNEL_FATBIN := $(BUILD)/cuda/reprod_kernels.fatbin
# The CUDA headers of the NCCL stand-ins and test programs (never the shim's).
CUDA_INC  ?= /usr/local/cuda/include

# ---- The build's configuration ---------------------------------------------------------------
# What the build was configured with is recorded in $(BUILD)/config/, one file per item, each
# rewritten only when its content changes; what depends on an item rebuilds when it changes, and
# only that (a new nvcc remakes the kernels, not the MPI hooks):
#   cc       the C compiler, its version and flags: every object and program
#   openmpi  Open MPI's headers (or "not built"): hooks/mpi/abi/mpi_abi_openmpi.o, the Open MPI programs
#   mpich    MPICH's headers (or "not built"): hooks/mpi/abi/mpi_abi_mpich.o, the MPICH programs
#   nvcc     nvcc, its version and flags (or "none"): the kernels' fatbin
#   kernels  whether the shim embeds kernels: shim/device/cuda_module.o
#   cuda     the CUDA include directory: the NCCL stand-ins and test programs
# (Headers' own changes are followed through the compiler's dependency files.) Before compiling
# anything, the build checks that what it needs is there, and otherwise stops with the Debian
# packages to install (`make deps`, as root, installs them and what the tests need).
CONFIG := $(BUILD)/config
CONFIG_ITEMS := cc openmpi mpich nvcc kernels cuda

CONFIG_cc      = $(CC_PATH): $(shell $(CC) --version 2>/dev/null | head -1); $(BASE) $(STRINGOPS) $(CFLAGS)
CONFIG_openmpi = $(if $(filter openmpi,$(MPI_FAMILIES)),$(OMPI_HEADER) (from $(MPICC)): $(OMPI_INC),not built)
CONFIG_mpich   = $(if $(filter mpich,$(MPI_FAMILIES)),$(MPICH_HEADER) (from $(MPICC_MPICH)): $(MPICH_INC),not built)
CONFIG_nvcc    = $(if $(NVCC),$(NVCC): $(shell $(NVCC) --version 2>/dev/null | tail -1); $(NVCCFLAGS) $(NVCC_ARCH),none)
CONFIG_kernels = $(if $(NVCC),yes: CUDA $(NVCC_VERSION); machine code $(KERNEL_SASS); PTX $(KERNEL_PTX),no)
CONFIG_cuda    = $(CUDA_INC)

# What the build needs and did not find, and the Debian packages that bring it.
CC_PATH      := $(shell command -v $(CC) 2>/dev/null)
LACKS_CC      = $(if $(CC_PATH),,the C compiler ($(CC)))
LACKS_LIBC    = $(if $(CC_PATH),$(if $(shell echo '\#include <stdio.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo y),,the C library's headers))
LACKS_OPENMPI = $(if $(filter openmpi,$(MPI_FAMILIES)),$(if $(OMPI_HEADER),,Open MPI's mpi.h (through MPICC=$(MPICC))))
LACKS_MPICH   = $(if $(filter mpich,$(MPI_FAMILIES)),$(if $(MPICH_HEADER),,MPICH's mpi.h (through MPICC_MPICH=$(MPICC_MPICH))))
BUILD_PACKAGES = $(strip $(if $(LACKS_CC),gcc libc6-dev) $(if $(LACKS_LIBC),libc6-dev) \
                 $(if $(LACKS_OPENMPI),libopenmpi-dev) $(if $(LACKS_MPICH),libmpich-dev))
comma := ,
# $(call report_lacks): say what is missing and how to get it (make's own line follows).
report_lacks = $(info reprod: cannot build; not found:)$(foreach lack,LACKS_CC LACKS_LIBC \
    LACKS_OPENMPI LACKS_MPICH,$(if $($(lack)),$(info reprod:     $($(lack)))))$(info \
    reprod: on Debian, install what is missing with:)$(info \
    reprod:     apt-get install -y $(BUILD_PACKAGES))$(info \
    reprod: (as root, `make deps` installs it, and what `make test` needs too))$(if \
    $(LACKS_OPENMPI)$(LACKS_MPICH),$(info \
    reprod: with an MPI installed elsewhere, name its wrapper: make MPICC=/path/to/mpicc (Open MPI)$(comma))$(info \
    reprod:     or MPICC_MPICH=/path/to/mpicc (MPICH); for one MPI family only$(comma) leave out the other:)$(info \
    reprod:     make MPI_FAMILIES=openmpi$(comma) or MPI_FAMILIES=mpich (its jobs then pass through unchanged)))
# What cuda_module.c tells about the kernels (REPROD_VERBOSE=1, and why they may not load): the
# toolkit's version as CUDA numbers it (13.0: 13000), the architectures built as machine code
# and as PTX.
NVCC_VERSION := $(if $(NVCC),$(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | awk '{ print $$1 * 1000 + $$2 * 10 }'))
KERNEL_SASS := $(patsubst code=sm_%,%,$(filter code=sm_%,$(subst $(comma), ,$(NVCC_ARCH))))
KERNEL_PTX  := $(patsubst code=compute_%,%,$(filter code=compute_%,$(subst $(comma), ,$(NVCC_ARCH))))

SHIM_SRC  := $(sort $(wildcard shim/*/*.c))
HOOK_SRC  := $(sort $(wildcard hooks/*/*.c hooks/*/*/*.c))
SHIM_OBJ  := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o) $(if $(NVCC),$(BUILD)/obj/shim/device/cuda_image.o)
# Python's side of the Python seeding hook (hooks/seeding/python.c), embedded as a string.
HOOK_OBJ  := $(HOOK_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/hooks/seeding/python_bootstrap.o

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
# headers (CUDA_INC) and linked with the stand-ins of build/standins/ (run with
# LD_LIBRARY_PATH there).
NCCL_PROGS := $(filter-out loaders nccl_user namespaces,$(basename $(notdir $(wildcard tests/nccl/*.c))))
NCCL_BIN  := $(NCCL_PROGS:%=$(BUILD)/tests/nccl/%) $(BUILD)/tests/nccl/loaders_linked \
             $(BUILD)/tests/nccl/loaders_dynamic $(BUILD)/tests/nccl/libnccl_user.so \
             $(BUILD)/tests/nccl/namespaces
# With nvcc, a second shim built without it: its host path must give the same bits.
NONVCC_SHIM = $(if $(NVCC),$(BUILD)/nonvcc/libreprod_shim.so)
# A shim without MPICH's headers (see its rule).
NOMPICH_SHIM := $(BUILD)/nompich/libreprod_shim.so
FORTRAN_BIN := $(foreach family,openmpi mpich,$(foreach binding,mpi f08,$(BUILD)/tests/fortran/$(family)/sum_$(binding)))
FUZZ_BIN  := $(BUILD)/tests/fuzz_engine
# Host-memory stand-ins for CUDA and NCCL (tests/standins_nccl/): what NCCL test programs link
# and run against on a machine without a GPU. Never part of the shim.
STANDINS  := $(BUILD)/standins
NCCL_STANDIN_LIBS := $(STANDINS)/libcuda.so.1 $(STANDINS)/libcudart.so.13 $(STANDINS)/libcudart.so.12 \
             $(STANDINS)/libcudart.so $(STANDINS)/libnccl.so.2 $(STANDINS)/libnccl.so
TEST_BIN  = $(UNIT_BIN) $(FUZZ_BIN) $(MPI_BIN) $(MPICH_BIN) $(FORTRAN_BIN) $(PROG_BIN) $(STANDIN_LIB) \
            $(NCCL_STANDIN_LIBS) $(STANDINS_WITHOUT) $(NCCL_BIN) $(NONVCC_SHIM) $(NOMPICH_SHIM) \
            $(MPI_STANDIN_INCOMPLETE) $(SEED_STANDIN_VARIANTS)
GPU_TEST_BIN := $(BUILD)/tests/gpu/check_kernels
EX_SRC    := $(sort $(wildcard examples/*.c))
EX_BIN    := $(EX_SRC:examples/%.c=$(BUILD)/examples/%)

.PHONY: all test test-unit test-scripts fuzz instrumented test-sanitize test-tsan bench demo deps clean
.PHONY: readme
.PHONY: gpu-tests test-gpu
.PHONY: format

all: $(SHIM) $(TOOL)

# ---- The configuration's records and what depends on them (see "The build's configuration")
# $(CONFIG)/ITEM holds $(CONFIG_ITEM), rewritten only when that changes. The compiler's file is
# the first thing every compilation waits for: the check of what the build lacks comes with it.
# $(call config_text,ITEM): the record's text in a shell's single quotes.
config_text = '$(subst ','"'"',$(strip $(CONFIG_$1)))'
$(addprefix $(CONFIG)/,$(CONFIG_ITEMS)): $(CONFIG)/%: FORCE
	$(if $(filter cc,$*),$(if $(BUILD_PACKAGES),$(call report_lacks)$(error stopped before compiling anything)))
	@mkdir -p $(dir $@)
	@printf '%s\n' $(call config_text,$*) | cmp -s - $@ || printf '%s\n' $(call config_text,$*) >$@

.PHONY: FORCE
FORCE:

$(BUILD)/obj/hooks/mpi/abi/mpi_abi_openmpi.o: $(CONFIG)/openmpi
$(BUILD)/obj/hooks/mpi/abi/mpi_abi_openmpi.o: SHIMFLAGS += $(OMPI_INC)
$(BUILD)/obj/hooks/mpi/abi/mpi_abi_mpich.o: $(CONFIG)/mpich
$(BUILD)/obj/hooks/mpi/abi/mpi_abi_mpich.o: SHIMFLAGS += $(MPICH_INC)
$(BUILD)/obj/shim/device/cuda_module.o: $(CONFIG)/kernels
$(BUILD)/obj/shim/device/cuda_module.o: SHIMFLAGS += $(if $(NVCC),-DREPROD_HAVE_KERNELS \
    -DREPROD_KERNEL_CUDA_VERSION=$(or $(NVCC_VERSION),0) -DREPROD_KERNEL_SASS='"$(KERNEL_SASS)"' \
    -DREPROD_KERNEL_PTX='"$(KERNEL_PTX)"')
# Programs and libraries built with $(CC) (the rules below name their sources with $< or a
# filter: these records are not among them).
$(TOOL) $(UNIT_BIN) $(FUZZ_BIN) $(PROG_BIN) $(STANDIN_LIB) $(GPU_TEST_BIN) $(BENCH_BIN) $(EX_BIN) \
    $(MPI_BIN) $(MPICH_BIN) $(BUILD)/tests/fortran/oracle.o $(BUILD)/tests/libkeep_loaded.so: $(CONFIG)/cc
$(MPI_BIN) $(EX_BIN) $(filter %/bench_mpi%,$(BENCH_BIN)) $(filter %/openmpi/%,$(FORTRAN_BIN)) \
    $(BUILD)/tests/fortran/openmpi/test_data.o: $(CONFIG)/openmpi
$(MPICH_BIN) $(filter %/mpich/%,$(FORTRAN_BIN)) $(BUILD)/tests/fortran/mpich/test_data.o: $(CONFIG)/mpich
$(NCCL_STANDIN_LIBS) $(NCCL_BIN) $(STANDINS)/kernels.o: $(CONFIG)/cc $(CONFIG)/cuda

$(BUILD)/obj/%.o: %.c $(CONFIG)/cc
	@mkdir -p $(dir $@)
	$(CC) $(SHIMFLAGS) -MMD -MP -c $< -o $@

# dlsym(RTLD_NEXT) must reach glibc as a tail call from the shim's dlsym, with the caller's
# return address in place; and ASan's start-up calls dlsym before its shadow memory exists.
$(BUILD)/obj/hooks/nccl/dlsym.o $(BUILD)/obj/shim/interpose/glibc_dlsym.o: SHIMFLAGS += -fno-sanitize=all -foptimize-sibling-calls
# The engine's kernels are tight loops of a few dozen instructions whose speed moved by 5-15%
# with where the code around them happened to put them; aligned to 64 bytes, it does not. Their
# vector helpers pass vectors by value between always-inlined functions: no call, so no ABI for
# -Wpsabi to note.
$(BUILD)/obj/shim/engine/engine%.o: SHIMFLAGS += -falign-loops=64 -Wno-psabi

# The kernels: rebuilt only when their sources change (nvcc is slow). ptxas reports each
# architecture's stack frame; tests/gpu/kernel_limits.sh fails the build when one exceeds CUDA's
# default 1 KiB a thread or when no PTX is embedded (make test-gpu prints what it found).
$(KERNEL_FATBIN): $(KERNEL_SRC) tests/gpu/kernel_limits.sh $(CONFIG)/nvcc
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_ARCH) -Xptxas -v -fatbin shim/device/cuda_kernels.cu -o $@.tmp \
	    2>$(BUILD)/cuda/ptxas.log || { cat $(BUILD)/cuda/ptxas.log; rm -f $@.tmp; exit 1; }
	sh tests/gpu/kernel_limits.sh $(BUILD)/cuda/ptxas.log $@.tmp >$(BUILD)/cuda/kernel_limits.txt \
	    || { cat $(BUILD)/cuda/kernel_limits.txt; rm -f $@.tmp; exit 1; }
	@cat $(BUILD)/cuda/kernel_limits.txt
	mv $@.tmp $@

$(BUILD)/obj/shim/device/cuda_image.o: shim/device/cuda_image.S $(KERNEL_FATBIN) $(CONFIG)/cc
	@mkdir -p $(dir $@)
	$(CC) -c -DREPROD_FATBIN='"$(KERNEL_FATBIN)"' $< -o $@

$(BUILD)/obj/hooks/seeding/python_bootstrap.o: hooks/seeding/python_bootstrap.S \
    hooks/seeding/python_bootstrap.py $(CONFIG)/cc
	@mkdir -p $(dir $@)
	$(CC) -c -DREPROD_PYTHON_BOOTSTRAP='"hooks/seeding/python_bootstrap.py"' $< -o $@

# -z defs: every symbol the shim uses must come from libc, libdl, libpthread or libm; MPI,
# NCCL, CUDA and PyTorch are reached through dlsym at run time only.
LINK_SHIM = $(CC) $(SANITIZE) -shared -Wl,-z,defs -Wl,--version-script=shim/exports.map \
    -Wl,-soname,libreprod_shim.so -o $@ $(filter %.o,$^) -ldl -lpthread -lm
$(SHIM): $(SHIM_OBJ) $(HOOK_OBJ) shim/exports.map
	$(LINK_SHIM)

# The mechanisms without the hooks, for unit tests that exercise internal functions.
$(CORE): $(SHIM_OBJ)
	@rm -f $@
	ar rcs $@ $^

TOOL_SRC := $(sort $(wildcard tools/*.c))
$(TOOL): $(TOOL_SRC) $(wildcard tools/*.h) $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim -Ihooks $(CFLAGS) $(TOOL_SRC) -o $@ $(CORE) -ldl -lpthread -lm

$(BUILD)/tests/test_%: tests/unit/test_%.c $(CORE) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim -Ihooks -Itests/unit $(CFLAGS) $< $(UNIT_EXTRA) -o $@ $(CORE) -lcriterion -lmpfr -lgmp -ldl -lpthread -lm

# The kernel's unit test also checks the stand-in libcuda's host build of the kernels.
$(BUILD)/tests/test_cuda_kernel: tests/standins_nccl/kernels.c tests/standins_nccl/kernels.h \
    shim/device/cuda_kernel.h shim/engine/engine_ordered.h shim/engine/engine_inner.h shim/engine/engine_round.h
$(BUILD)/tests/test_cuda_kernel: UNIT_EXTRA = tests/standins_nccl/kernels.c

# The engine's fuzzer against MPFR (tests/engine/fuzz_engine.c; make fuzz).
$(BUILD)/tests/fuzz_engine: tests/engine/fuzz_engine.c tests/engine/fuzz_inputs.h $(CORE) tests/unit/engine_oracle.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim -Ihooks -Itests/unit $(CFLAGS) $< -o $@ $(CORE) -lmpfr -lgmp -ldl -lpthread -lm

# Plain test programs (no shim, no MPI): what a preloaded process looks like from inside.
$(BUILD)/tests/progs/%: tests/progs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude $(CFLAGS) $< -o $@ -ldl -lpthread -lm

# A preload library that fails the shim's large allocations on one rank (tests/mpi/mpi_hostile.sh).
$(BUILD)/tests/progs/libfailalloc.so: tests/progs/failalloc.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(CFLAGS) $< -o $@ -ldl

# Host-memory stand-ins for libraries a test machine lacks (libnccl, libcurand): used only by
# tests, loaded RTLD_LOCAL by the test programs as the real frameworks do.
$(BUILD)/tests/standins/lib%.so: tests/standins/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(CFLAGS) $< -o $@ -lm

# The stand-in MPI library (tests/standins/mpi_standin.c, tests/mpi/mpi_passthrough.sh): of no
# known family (the generic rule above), and, under the same name in a directory of its own,
# one that looks like MPICH and lacks MPI_Alltoallv; the job that links it picks one with
# LD_LIBRARY_PATH.
MPI_STANDIN_INCOMPLETE := $(BUILD)/tests/standins/mpich_incomplete/libmpi_standin.so
$(BUILD)/tests/standins/libmpi_standin.so: tests/standins/mpi_standin.h
$(MPI_STANDIN_INCOMPLETE): tests/standins/mpi_standin.c tests/standins/mpi_standin.h $(CONFIG)/cc
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(CFLAGS) -DSTANDIN_WITHOUT_ALLTOALLV \
	    '-DSTANDIN_VERSION="MPICH Version: 4.0.2 (a stand-in lacking MPI_Alltoallv)"' $< -o $@

# The seeding stand-ins without what the hooks want (tests/seed/seed_missing.sh): a libcurand
# lacking its seeding call, a libtorch_cuda hiding the callers whose seeds pass unchanged.
SEED_STANDIN_VARIANTS := $(BUILD)/tests/standins/lacking/libcurand.so $(BUILD)/tests/standins/lacking/libtorchcuda.so
$(BUILD)/tests/standins/lacking/libcurand.so: STANDIN_VARIANT = -DSTANDIN_WITHOUT_SEEDING
$(BUILD)/tests/standins/lacking/libtorchcuda.so: STANDIN_VARIANT = -DSTANDIN_HIDDEN_HELPERS
$(SEED_STANDIN_VARIANTS): $(BUILD)/tests/standins/lacking/lib%.so: tests/standins/%.c $(CONFIG)/cc
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -fPIC -shared $(CFLAGS) $(STANDIN_VARIANT) $< -o $@ -lm

$(BUILD)/tests/progs/mpi_standin_job: tests/progs/mpi_standin_job.c tests/standins/mpi_standin.h \
    $(BUILD)/tests/standins/libmpi_standin.so
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Itests/standins $(CFLAGS) $< -o $@ -L$(BUILD)/tests/standins -lmpi_standin

# The CUDA and NCCL stand-ins. The CUDA headers come in with -isystem: nccl.h declares
# ncclGroupStart() without a prototype, which -Wstrict-prototypes would refuse. libcudart and
# libnccl call into libcuda.so.1 (one set of streams and allocations) and find it beside them.
# STANDIN_KERNEL_SRC: the host builds of the shim's kernels (kernels.h), linked into libcuda.
STANDIN_KERNEL_SRC ?= tests/standins_nccl/kernels.c
STANDIN_CFLAGS = $(BASE) -fPIC -shared -isystem $(CUDA_INC) -Itests/standins_nccl $(CFLAGS)
STANDIN_CUDA_SRC := $(filter-out %/cuda_runtime.c,$(wildcard tests/standins_nccl/cuda_*.c))
STANDIN_NCCL_SRC := $(wildcard tests/standins_nccl/nccl_*.c)
STANDIN_HEADERS := $(wildcard tests/standins_nccl/*.h)

# The kernels' host build includes the shim's headers (shim/device/cuda.h would hide CUDA's cuda.h
# from the other stand-in files): an object of its own.
$(STANDINS)/kernels.o: $(STANDIN_KERNEL_SRC) tests/standins_nccl/kernels.h shim/device/cuda_kernel.h \
    shim/device/cuda_kernel_fixed.h shim/engine/engine_fixed.h \
    shim/engine/engine_ordered.h shim/engine/engine_inner.h shim/engine/engine_round.h
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

# Stand-ins of an older library that lacks one function the shim wants (tests/nccl/nccl_device.sh),
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
$(BUILD)/tests/mpi/%: tests/mpi/%.c $(wildcard tests/mpi/*.h) tests/unit/engine_oracle.h
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) -Iinclude -Itests/mpi -Itests/unit $(CFLAGS) $< -o $@ -lmpfr -lgmp -lpthread -lm

$(BUILD)/tests/mpich/%: tests/mpi/%.c $(wildcard tests/mpi/*.h) tests/unit/engine_oracle.h
	@mkdir -p $(dir $@)
	$(MPICC_MPICH) $(BASE) -Wno-stringop-overflow -Iinclude -Itests/mpi -Itests/unit $(CFLAGS) $< -o $@ -lmpfr -lgmp -lpthread -lm

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

# The second shim's own build follows its own configuration (build/nonvcc/config): asked each
# time, it rebuilds what changed, nothing when nothing did.
$(BUILD)/nonvcc/libreprod_shim.so: FORCE
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/nonvcc NVCC= $@

# A shim built without MPICH's headers, as `make MPI_FAMILIES=openmpi` builds it, for the tests
# of its pass-through (tests/mpi/mpi_passthrough.sh): the build's own objects but one.
NOMPICH_OBJ := $(filter-out %/mpi_abi_mpich.o,$(SHIM_OBJ) $(HOOK_OBJ)) $(BUILD)/nompich/obj/hooks/mpi/abi/mpi_abi_mpich.o
$(BUILD)/nompich/obj/hooks/mpi/abi/mpi_abi_mpich.o: hooks/mpi/abi/mpi_abi_mpich.c $(CONFIG)/cc
	@mkdir -p $(dir $@)
	$(CC) $(SHIMFLAGS) -DREPROD_WITHOUT_MPICH_HEADERS -MMD -MP -c $< -o $@

$(NOMPICH_SHIM): $(NOMPICH_OBJ) shim/exports.map
	$(LINK_SHIM)

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
	$(CC) $(BASE) -O3 -Iinclude -Ishim -Ihooks $(CFLAGS) $< -o $@ $(CORE) -ldl -lpthread -lm

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(MPICC) $(BASE) $(CFLAGS) $< -o $@ -lm

# The device checks against the real driver (tests/gpu/): built here, run on a GPU machine.
$(BUILD)/tests/gpu/%: tests/gpu/%.c $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Iinclude -Ishim -Ihooks $(CFLAGS) $< -o $@ $(CORE) -ldl -lpthread -lm

gpu-tests: $(GPU_TEST_BIN)

test-gpu: all $(GPU_TEST_BIN)
	@BUILD=$(BUILD) tests/gpu/run.sh

deps:
	@tools/install-deps

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@tools/run-tests

# One group: `make test-unit`, `make test-scripts`, or a single script with
# `make test-scripts ONLY=tests/mpi/mpi_exactness.sh`. The unit tests need only themselves:
# with another compiler, `make BUILD=build/clang CC=clang NVCC= test-unit` (as CI does).
test-unit: all $(UNIT_BIN)
	@TEST_UNIT_DIR=$(BUILD)/tests tools/run-tests unit
test-scripts: all $(TEST_BIN)
	@tools/run-tests scripts $(ONLY)

# The engine fuzzer for long: `make fuzz`, `make fuzz FUZZ_ITERATIONS=1000000 FUZZ_SEED=42`
# (a random seed by default; the fuzzer prints it, and a failure prints the command to replay).
FUZZ_ITERATIONS ?= 100000
FUZZ_SEED       ?= $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
fuzz: deps
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
	$(FUZZ_BIN) $(FUZZ_ITERATIONS) $(FUZZ_SEED)

# Sanitizer builds: the shim, its core, the unit tests and the fuzzer instrumented, each
# build in a directory of its own; the programs the test scripts start stay plain (they stand
# for the unmodified job). `make test-sanitize ONLY=tests/runtime/trace.sh` runs one script.
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer

instrumented: $(SHIM) $(NOMPICH_SHIM) $(UNIT_BIN) $(FUZZ_BIN) $(BUILD)/tests/libkeep_loaded.so

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
	@$(MAKE) --no-print-directory all $(BENCH_BIN) $(BUILD)/tests/mpi/cost_counts
	@tools/run-bench

demo: deps
	@$(MAKE) --no-print-directory all $(EX_BIN)
	@tools/run-demo

# README.md's table of settings is the shim's own (`reprod settings --markdown`, from the table
# in shim/runtime/config.c), written between its two marker lines; tests/tools/readme.sh fails
# when they differ.
readme: $(TOOL)
	@test "$$(grep -c '^<!-- settings: \(begin\|end\)' README.md)" = 2 || \
	    { echo "README.md: expected one '<!-- settings: begin' and one '<!-- settings: end' line" >&2; exit 1; }
	@$(TOOL) settings --markdown >$(BUILD)/settings.md
	@awk -v table=$(BUILD)/settings.md '/^<!-- settings: end/ { inside = 0 } !inside { print } \
	    /^<!-- settings: begin/ { while ((getline line < table) > 0) print line; inside = 1 }' \
	    README.md >$(BUILD)/README.md
	@cmp -s $(BUILD)/README.md README.md && echo "README.md: the table of settings is current" || \
	    { cp $(BUILD)/README.md README.md && echo "README.md: the table of settings rewritten"; }

format:
	clang-format -i include/*.h shim/*.h shim/*/*.[ch] hooks/*.h hooks/*/*.[ch] hooks/*/*/*.c tests/unit/*.[ch] tests/mpi/*.[ch] bench/*.c tools/*.c

clean:
	rm -rf $(BUILD)

-include $(SHIM_OBJ:.o=.d) $(HOOK_OBJ:.o=.d) $(BUILD)/nompich/obj/hooks/mpi/abi/mpi_abi_mpich.d
