/* solver.c: conjugate gradient on the 2-D Poisson problem (5-point Laplacian, Dirichlet
 * boundary, right-hand side 1) on an n x n grid, rows dealt to the ranks in blocks, halo rows
 * exchanged with MPI_Sendrecv, dot products and norms summed with MPI_Allreduce(MPI_DOUBLE,
 * MPI_SUM): an ordinary MPI program that knows nothing of reprod.
 *
 *     mpirun -np 4 build/examples/solver [n] [tolerance]
 *
 * Rank 0 prints `residual <relative residual, %a>` and, last,
 * `solution <hash of the solution gathered in global order> iterations <n>`.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rows [first, first + count) of the grid that a rank holds, with a halo row on each side. */
struct block {
    int n, first, count, rank, size;
    MPI_Comm comm;
};

/* The dot product of two distributed vectors (owned rows only): a local sum over this rank's
 * rows, then the sum of the ranks' partial sums. */
static double dot(const struct block *b, const double *x, const double *y)
{
    double local = 0;
    for (long i = b->n; i < (long)(b->count + 1) * b->n; i++) local += x[i] * y[i];
    double global;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, b->comm);
    return global;
}

/* y = A x for the 5-point Laplacian (4 on the diagonal, -1 to each neighbour), after filling
 * x's halo rows from the neighbouring ranks (zero rows at the boundary). */
static void apply(const struct block *b, double *x, double *y)
{
    int n = b->n, up = b->rank - 1, down = b->rank + 1;
    if (up < 0) up = MPI_PROC_NULL;
    if (down >= b->size) down = MPI_PROC_NULL;
    double *top = x, *bottom = x + (long)(b->count + 1) * n;
    memset(top, 0, n * sizeof *x);
    memset(bottom, 0, n * sizeof *x);
    MPI_Sendrecv(x + n, n, MPI_DOUBLE, up, 0, bottom, n, MPI_DOUBLE, down, 0, b->comm,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(x + (long)b->count * n, n, MPI_DOUBLE, down, 1, top, n, MPI_DOUBLE, up, 1,
                 b->comm, MPI_STATUS_IGNORE);
    for (int row = 1; row <= b->count; row++)
        for (int col = 0; col < n; col++) {
            long i = (long)row * n + col;
            double sum = 4 * x[i] - x[i - n] - x[i + n];
            if (col > 0) sum -= x[i - 1];
            if (col < n - 1) sum -= x[i + 1];
            y[i] = sum;
        }
}

/* FNV-1a over the bytes of `data`. */
static uint64_t hash_bytes(const void *data, size_t length)
{
    const unsigned char *byte = data;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < length; i++) hash = (hash ^ byte[i]) * 0x100000001b3ull;
    return hash;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct block b = {.n = argc > 1 ? atoi(argv[1]) : 64, .comm = MPI_COMM_WORLD};
    double tolerance = argc > 2 ? atof(argv[2]) : 1e-10;
    MPI_Comm_rank(b.comm, &b.rank);
    MPI_Comm_size(b.comm, &b.size);
    int n = b.n, base = n / b.size, extra = n % b.size;
    b.count = base + (b.rank < extra);
    b.first = b.rank * base + (b.rank < extra ? b.rank : extra);

    long cells = (long)(b.count + 2) * n; /* owned rows and two halo rows */
    double *x = calloc(cells, sizeof *x), *r = calloc(cells, sizeof *r);
    double *p = calloc(cells, sizeof *p), *q = calloc(cells, sizeof *q);
    if (!x || !r || !p || !q) MPI_Abort(b.comm, 1);
    for (long i = n; i < (long)(b.count + 1) * n; i++) r[i] = p[i] = 1; /* b = 1, x0 = 0 */

    double rr = dot(&b, r, r), norm_b = sqrt(rr);
    int iterations = 0;
    while (sqrt(rr) > tolerance * norm_b && iterations < 10 * n * n) {
        apply(&b, p, q);
        double alpha = rr / dot(&b, p, q);
        for (long i = n; i < (long)(b.count + 1) * n; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        double rr_next = dot(&b, r, r);
        double beta = rr_next / rr;
        rr = rr_next;
        for (long i = n; i < (long)(b.count + 1) * n; i++) p[i] = r[i] + beta * p[i];
        iterations++;
    }

    /* The solution in global order on rank 0. */
    int *counts = malloc(b.size * sizeof *counts), *offsets = malloc(b.size * sizeof *offsets);
    double *whole = b.rank == 0 ? malloc((size_t)n * n * sizeof *whole) : NULL;
    for (int k = 0; k < b.size; k++) {
        counts[k] = (base + (k < extra)) * n;
        offsets[k] = (k * base + (k < extra ? k : extra)) * n;
    }
    MPI_Gatherv(x + n, b.count * n, MPI_DOUBLE, whole, counts, offsets, MPI_DOUBLE, 0, b.comm);
    if (b.rank == 0) {
        printf("residual %a\n", sqrt(rr) / norm_b);
        printf("solution %016llx iterations %d\n",
               (unsigned long long)hash_bytes(whole, (size_t)n * n * sizeof *whole), iterations);
    }
    free(whole);
    free(counts);
    free(offsets);
    free(x);
    free(r);
    free(p);
    free(q);
    MPI_Finalize();
    return 0;
}
