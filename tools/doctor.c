/* doctor.c: `reprod doctor -- CMD...`: run CMD under the shim with a private log per process,
 * then say per family (MPI, NCCL, seeding, entropy) what the shim reached and what was out of
 * its reach, and give a one-line verdict.
 *
 * What was reached comes from the processes' own accounts: REPROD_VERBOSE=1 makes each process
 * the shim reached write a "counts:" line at exit into REPROD_LOG=<private dir>/log.%p. What
 * was out of reach is read from the executables named on the command line (ELF): setuid or
 * setgid (the loader ignores LD_PRELOAD), statically linked, an MPI linked in statically.
 * Exit status: 0 when the shim reached float reductions and made every one deterministic; 1
 * when one passed through non-deterministically, something is out of reach, or nothing was
 * reached; 2 on a usage error.
 */
#include "reprod_tool.h"

#include "runtime/record.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char doctor_help[] =
    "usage: reprod doctor [--] CMD [ARGS...]\n"
    "Run CMD under the shim (REPROD_VERBOSE=1, a private log per process) and report, per\n"
    "family (MPI, NCCL, seeding, entropy), what the shim reached and what was out of its\n"
    "reach (setuid or static executables, an MPI linked in statically, an MPI library the\n"
    "shim does not support, processes that never reported), then a one-line verdict.\n"
    "    reprod doctor -- mpirun -np 4 ./solver\n"
    "Exit status: 0 when every float reduction reached was made deterministic; 1 when one\n"
    "was not, something was out of reach, or nothing was reached; 2 on a usage error.\n";

/* The totals over every process's "counts:" line. */
struct totals {
    int processes;
    int rejected; /* lines that began as a counts: line but were not one the shim writes */
    unsigned long long exact, ordered, passed, audited, seeds, mpi_made, mpi_passed, nccl_made,
        nccl_passed, risky, unsupported;
    unsigned long long risky_by_reason[5]; /* as risky_reasons */
    char risky_reasons[512];               /* "mode-off 16, ..." once all are read */
    char device[64]; /* where device reductions ran: a host path's word wins over "kernels" */
};

/* Reasons whose pass-through leaves a float reduction non-deterministic (stats.c's names,
 * with blanks and commas as dashes). */
static const char *const risky_reasons[5] = {"mode-off", "intercommunicator", "out-of-memory",
                                             "unsupported", "audit-mode--native"};

/* The keys of a counts: line that doctor sums (others, added later, are left alone). */
static const struct {
    const char *key;
    size_t offset;
} count_keys[] = {
    {"exact", offsetof(struct totals, exact)},
    {"ordered", offsetof(struct totals, ordered)},
    {"passed", offsetof(struct totals, passed)},
    {"audited", offsetof(struct totals, audited)},
    {"seeds", offsetof(struct totals, seeds)},
    {"MPI.made", offsetof(struct totals, mpi_made)},
    {"MPI.passed", offsetof(struct totals, mpi_passed)},
    {"NCCL.made", offsetof(struct totals, nccl_made)},
    {"NCCL.passed", offsetof(struct totals, nccl_passed)},
};

/* A count the shim wrote: decimal digits only. */
static int read_count(const char *text, unsigned long long *value)
{
    if (!*text || strspn(text, "0123456789") != strlen(text) || strlen(text) > 19) return -1;
    *value = strtoull(text, NULL, 10);
    return 0;
}

/* Add the words of one counts: line to *totals: all of them, or none when a word the doctor
 * reads is not a count (then the line is not the shim's). Returns 0 or -1. */
static int add_counts(struct totals *totals, const struct reprod_record_word *words, int count)
{
    struct totals line = {0};
    for (int i = 0; i < count; i++) {
        unsigned long long value;
        for (size_t k = 0; k < sizeof count_keys / sizeof count_keys[0]; k++) {
            if (strcmp(words[i].key, count_keys[k].key) != 0) continue;
            if (read_count(words[i].value, &value) != 0) return -1;
            *(unsigned long long *)((char *)&line + count_keys[k].offset) += value;
        }
        if (strcmp(words[i].key, "device") == 0)
            snprintf(line.device, sizeof line.device, "%s", words[i].value);
        if (strncmp(words[i].key, "pass.", 5) != 0) continue;
        for (size_t k = 0; k < sizeof risky_reasons / sizeof risky_reasons[0]; k++) {
            if (strcmp(words[i].key + 5, risky_reasons[k]) != 0) continue;
            if (read_count(words[i].value, &value) != 0) return -1;
            line.risky += value;
            line.risky_by_reason[k] += value;
            if (strcmp(risky_reasons[k], "unsupported") == 0) line.unsupported += value;
        }
    }
    totals->processes++;
    if (line.device[0] && (!totals->device[0] || strstr(line.device, "host"))) /* host wins */
        snprintf(totals->device, sizeof totals->device, "%s", line.device);
    for (size_t k = 0; k < sizeof count_keys / sizeof count_keys[0]; k++)
        *(unsigned long long *)((char *)totals + count_keys[k].offset) +=
            *(unsigned long long *)((char *)&line + count_keys[k].offset);
    for (size_t k = 0; k < sizeof risky_reasons / sizeof risky_reasons[0]; k++)
        totals->risky_by_reason[k] += line.risky_by_reason[k];
    totals->risky += line.risky;
    totals->unsupported += line.unsupported;
    return 0;
}

/* The message of a line the shim wrote, "reprod[<rank>]: <message>": the message (changed in
 * place: its newline removed), or NULL when the line is not one. A value inside a message is
 * escaped by the shim, so a line can only begin this way where the shim began it. */
static char *shim_message(char *line)
{
    if (strncmp(line, "reprod[", 7) != 0) return NULL;
    char *p = line + 7;
    if (*p == '-') p++;
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || strncmp(p + digits, "]: ", 3) != 0) return NULL;
    line[strcspn(line, "\n")] = '\0';
    return p + digits + 3;
}

/* Read every log of `dir`: counts lines into *totals; the first warning about an MPI the shim
 * does not support into `library` (empty when none). */
static void read_logs(const char *dir, struct totals *totals, char *library, size_t library_bytes)
{
    library[0] = '\0';
    DIR *listing = opendir(dir);
    if (!listing) return;
    struct dirent *entry;
    while ((entry = readdir(listing))) {
        if (entry->d_name[0] == '.') continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        FILE *file = fopen(path, "r");
        if (!file) continue;
        char line[4096];
        while (fgets(line, sizeof line, file)) {
            char *message = shim_message(line);
            if (!message) continue;
            if (strncmp(message, "counts: ", 8) == 0) {
                struct reprod_record_word words[64];
                int count = reprod_record_split(message + 8, words, 64);
                if (count < 0 || add_counts(totals, words, count) != 0) totals->rejected++;
            } else if (!library[0] && strstr(message, "(unsupported")) {
                reprod_escape_controls(message, strlen(message), library, library_bytes);
            }
        }
        fclose(file);
        unlink(path);
    }
    closedir(listing);
    size_t used = 0;
    for (size_t k = 0; k < sizeof risky_reasons / sizeof risky_reasons[0]; k++) {
        if (!totals->risky_by_reason[k] || used >= sizeof totals->risky_reasons) continue;
        int n =
            snprintf(totals->risky_reasons + used, sizeof totals->risky_reasons - used, "%s%s %llu",
                     used ? ", " : "", risky_reasons[k], totals->risky_by_reason[k]);
        if (n > 0) used += (size_t)n;
    }
}

/* What an ELF file says about the shim's reach. */
struct elf_facts {
    int elf, dynamic, links_mpi, defines_mpi_init, fortran_mpi, mpich, openmpi;
};

static void read_needed(const unsigned char *base, size_t size, const Elf64_Shdr *section,
                        const Elf64_Shdr *sections, struct elf_facts *facts)
{
    const Elf64_Shdr *strings = &sections[section->sh_link];
    if (section->sh_offset + section->sh_size > size ||
        strings->sh_offset + strings->sh_size > size)
        return;
    const Elf64_Dyn *dyn = (const Elf64_Dyn *)(base + section->sh_offset);
    for (size_t i = 0; i < section->sh_size / sizeof *dyn && dyn[i].d_tag != DT_NULL; i++) {
        if (dyn[i].d_tag != DT_NEEDED || dyn[i].d_un.d_val >= strings->sh_size) continue;
        const char *name = (const char *)base + strings->sh_offset + dyn[i].d_un.d_val;
        if (strncmp(name, "libmpi", 6) == 0 || strstr(name, "mpich")) facts->links_mpi = 1;
        if (strstr(name, "mpifh") || strstr(name, "usempi") ||
            (strstr(name, "mpi") && strstr(name, "fort")))
            facts->fortran_mpi = 1;
        if (strstr(name, "mpich")) facts->mpich = 1;
        if (strncmp(name, "libmpi.so", 9) == 0 || strstr(name, "libmpi_")) facts->openmpi = 1;
    }
}

static void read_symbols(const unsigned char *base, size_t size, const Elf64_Shdr *section,
                         const Elf64_Shdr *sections, struct elf_facts *facts)
{
    const Elf64_Shdr *strings = &sections[section->sh_link];
    if (section->sh_offset + section->sh_size > size ||
        strings->sh_offset + strings->sh_size > size)
        return;
    const Elf64_Sym *symbols = (const Elf64_Sym *)(base + section->sh_offset);
    for (size_t i = 0; i < section->sh_size / sizeof *symbols; i++) {
        if (symbols[i].st_shndx == SHN_UNDEF || symbols[i].st_name >= strings->sh_size) continue;
        const char *name = (const char *)base + strings->sh_offset + symbols[i].st_name;
        if (strcmp(name, "MPI_Init") == 0 || strcmp(name, "PMPI_Init") == 0)
            facts->defines_mpi_init = 1;
    }
}

static void inspect_elf(const char *path, struct elf_facts *facts)
{
    memset(facts, 0, sizeof *facts);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat status;
    if (fd < 0 || fstat(fd, &status) != 0 || status.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        if (fd >= 0) close(fd);
        return;
    }
    size_t size = (size_t)status.st_size;
    const unsigned char *base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return;
    const Elf64_Ehdr *header = (const Elf64_Ehdr *)base;
    if (memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 && header->e_ident[EI_CLASS] == ELFCLASS64 &&
        header->e_shoff + (size_t)header->e_shnum * sizeof(Elf64_Shdr) <= size) {
        facts->elf = 1;
        const Elf64_Shdr *sections = (const Elf64_Shdr *)(base + header->e_shoff);
        for (int i = 0; i < header->e_shnum; i++) {
            if (sections[i].sh_link >= header->e_shnum) continue;
            if (sections[i].sh_type == SHT_DYNAMIC) {
                facts->dynamic = 1;
                read_needed(base, size, &sections[i], sections, facts);
            }
            if (sections[i].sh_type == SHT_SYMTAB || sections[i].sh_type == SHT_DYNSYM)
                read_symbols(base, size, &sections[i], sections, facts);
        }
    }
    munmap((void *)base, size);
}

/* The executable `word` names (PATH searched for the command itself), or 0. */
static int resolve(const char *word, int search_path, char *path, size_t path_bytes)
{
    struct stat status;
    if (strchr(word, '/') || !search_path) {
        snprintf(path, path_bytes, "%s", word);
        return stat(path, &status) == 0 && S_ISREG(status.st_mode) && access(path, X_OK) == 0;
    }
    const char *paths = getenv("PATH");
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", paths ? paths : "/usr/bin:/bin");
    for (char *dir = strtok(copy, ":"); dir; dir = strtok(NULL, ":")) {
        snprintf(path, path_bytes, "%s/%s", dir, word);
        if (stat(path, &status) == 0 && S_ISREG(status.st_mode) && access(path, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* Look at the executables on the command line; print what is out of reach and what each uses.
 * Returns how many findings put something out of the shim's reach. */
static int inspect_command(char **argv, int *fortran, int *mpich)
{
    int out_of_reach = 0;
    for (int i = 0; argv[i]; i++) {
        char path[PATH_MAX], shown[1024];
        if (!resolve(argv[i], i == 0, path, sizeof path)) continue;
        struct stat status;
        struct elf_facts facts;
        stat(path, &status);
        inspect_elf(path, &facts);
        if (!facts.elf) continue;
        reprod_escape_text(path, shown, sizeof shown);
        if (status.st_mode & (S_ISUID | S_ISGID)) {
            printf("  out of reach: %s is setuid/setgid: the loader ignores LD_PRELOAD there\n",
                   shown);
            out_of_reach++;
        } else if (!facts.dynamic) {
            printf("  out of reach: %s is statically linked: nothing can be preloaded into it\n",
                   shown);
            out_of_reach++;
        } else if (facts.defines_mpi_init && !facts.links_mpi) {
            printf("  out of reach: %s defines MPI_Init itself (an MPI linked in statically): its "
                   "MPI calls never reach the shim\n",
                   shown);
            out_of_reach++;
        }
        *fortran |= facts.fortran_mpi;
        *mpich |= facts.mpich;
    }
    return out_of_reach;
}

/* Run argv with the doctor's environment; returns its wait status. */
static int run_command(char **argv, const char *dir)
{
    char pattern[PATH_MAX];
    snprintf(pattern, sizeof pattern, "%s/log.%%p", dir);
    setenv("REPROD_VERBOSE", "1", 1);
    setenv("REPROD_LOG", pattern, 1);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) _exit(reprod_exec("doctor", argv));
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) < 0) return -1;
    return status;
}

int reprod_doctor_command(int argc, char **argv)
{
    int first = 0;
    if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        fputs(doctor_help, stdout);
        return 0;
    }
    if (argc > 0 && strcmp(argv[0], "--") == 0) first = 1;
    if (first >= argc) {
        fprintf(stderr, "reprod doctor: no command\n%s", doctor_help);
        return 2;
    }
    if (reprod_check_settings("doctor") != 0 || reprod_preload_shim() != 0) return 2;
    char dir[] = "/tmp/reprod-doctor.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("reprod doctor: mkdtemp");
        return 2;
    }
    int status = run_command(argv + first, dir);
    struct totals totals;
    memset(&totals, 0, sizeof totals);
    char library[512];
    read_logs(dir, &totals, library, sizeof library);
    rmdir(dir);

    char command[1024];
    printf("reprod doctor: %s exited with status %d\n",
           reprod_escape_text(argv[first], command, sizeof command),
           WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    printf("processes that reported: %d\n", totals.processes);
    if (totals.rejected)
        printf("  ignored: %d log lines that begin as a counts: line but are not in the shim's "
               "form (written by something else?)\n",
               totals.rejected);
    int fortran = 0, mpich = 0;
    int out_of_reach = inspect_command(argv + first, &fortran, &mpich);
    unsigned long long mpi = totals.mpi_made + totals.mpi_passed + totals.audited;
    unsigned long long nccl = totals.nccl_made + totals.nccl_passed;
    printf("MPI: %llu calls made deterministic, %llu passed through", totals.mpi_made,
           totals.mpi_passed);
    if (totals.audited) printf(", %llu audited (native results)", totals.audited);
    printf("%s%s%s\n", totals.risky ? " (not deterministic: " : "", totals.risky_reasons,
           totals.risky ? ")" : "");
    if (totals.unsupported && library[0]) printf("  not supported: %s\n", library);
    if (fortran)
        printf("  Fortran bindings: %s\n", mpi ? "reached (the shim answers the PMPI_ and MPI_ "
                                                 "names they call)"
                                               : "linked, but no MPI call reached the shim");
    if (mpich && mpi) printf("  MPICH family: reached\n");
    printf("NCCL: %llu calls made deterministic, %llu passed through\n", totals.nccl_made,
           totals.nccl_passed);
    if (totals.device[0]) { /* "kernels", "host:<why>" or "kernels+host:<why>" (cuda.h) */
        char *host = strstr(totals.device, "host:");
        for (char *c = host; c && *c; c++)
            if (*c == '-') *c = ' ';
        printf("  device reductions: %s%s%s%s\n",
               strncmp(totals.device, "kernels", 7) == 0 ? "on the GPU kernels" : "",
               host && totals.device[0] == 'k' ? ", and " : "",
               host ? "on the host path (slower, the same bits): " : "", host ? host + 5 : "");
    }
    printf("seeding: %llu seeding calls re-derived\n", totals.seeds);
    printf("entropy: %s\n", getenv("REPROD_ENTROPY") && *getenv("REPROD_ENTROPY")
                                ? "pinned by REPROD_ENTROPY in every process that loaded the shim"
                                : "not pinned (REPROD_ENTROPY unset; debugging only)");
    if (!totals.processes)
        printf("  no process reported: none loaded the shim and reached MPI, NCCL or a seeding "
               "call\n");
    const char *verdict;
    int result = 1;
    if (totals.risky)
        verdict = "some float reductions were passed through unchanged: not reproducible";
    else if (out_of_reach)
        verdict = "part of the job is out of the shim's reach";
    else if (mpi + nccl == 0 && totals.seeds == 0)
        verdict = "nothing was reached: no MPI, NCCL or seeding call went through the shim";
    else if (totals.exact + totals.ordered == 0)
        verdict = "reached, but no float reduction was made deterministic (none was made?)",
        result = totals.seeds ? 0 : 1;
    else
        verdict = "every float reduction reached was made deterministic", result = 0;
    printf("verdict: %s\n", verdict);
    return result;
}
