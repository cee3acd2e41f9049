"""An unmodified mpi4py job: float sums of numpy arrays through MPI's buffer interface.

Run under mpirun (3 ranks or more) by /usr/bin/python3. Every rank builds every rank's
contribution from a fixed seed, so it knows the exact sum of each element: math.fsum (correctly
rounded) for float64, fractions.Fraction rounded once to binary32 for float32. The data is
chosen so that the order of a native reduction changes its result.

Checks, for comm.Allreduce, comm.Reduce (every root), comm.Scan and comm.Iallreduce + Wait
on float64 and float32 arrays, with and without MPI.IN_PLACE:
  - the result is bitwise identical on every rank that receives it;
  - it equals the correctly rounded exact sum (unless --native, where only the number of
    elements that differ is reported: the real library may round differently).
Prints one line per check; exits 1 on any failure.
"""

import math
import struct
import sys
from fractions import Fraction

import numpy as np
from mpi4py import MPI

NATIVE = "--native" in sys.argv[1:]
COUNT = 4099  # not a multiple of the rank count; large enough for the shim's chunked path
SEED = 20240611

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []
native_differences = 0


def contributions(dtype):
    """Every rank's contribution: magnitudes over many binades and both signs, so that the
    rounding of a sum depends on the order of its terms."""
    rng = np.random.default_rng(SEED + np.dtype(dtype).itemsize)
    spread = 40 if dtype == np.float64 else 12
    mantissa = rng.uniform(1.0, 2.0, size=(size, COUNT))
    exponent = rng.integers(-spread, spread + 1, size=(size, COUNT))
    sign = rng.choice([-1.0, 1.0], size=(size, COUNT))
    return (sign * np.ldexp(mantissa, exponent)).astype(dtype)


def round_to_float32(value):
    """The Fraction `value` rounded to nearest binary32, ties to even, with subnormals and
    overflow: one rounding, from the exact value."""
    if value == 0:
        return np.float32(0.0)
    negative = value < 0
    a = -value if negative else value
    exponent = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** exponent > a:
        exponent -= 1
    # a is in [2^exponent, 2^(exponent+1)); keep 24 significant bits (fewer below 2^-126).
    quantum_exponent = max(exponent, -126) - 23
    scaled = a / Fraction(2) ** quantum_exponent
    integer = scaled.numerator // scaled.denominator
    remainder = scaled - integer
    if remainder > Fraction(1, 2) or (remainder == Fraction(1, 2) and integer % 2 == 1):
        integer += 1
    result = Fraction(integer) * Fraction(2) ** quantum_exponent
    if result >= Fraction(2) ** 128:
        rounded = np.float32(np.inf)
    else:
        rounded = np.float32(float(result))  # exact: `result` has at most 24 bits
        assert Fraction(float(rounded)) == result
    return -rounded if negative else rounded


def exact_sums(data, terms):
    """The correctly rounded sums of rows 0 .. terms-1 of `data`, per element."""
    if data.dtype == np.float64:
        return np.array([math.fsum(data[:terms, i]) for i in range(COUNT)], dtype=np.float64)
    return np.array(
        [round_to_float32(sum((Fraction(float(x)) for x in data[:terms, i]), Fraction(0)))
         for i in range(COUNT)],
        dtype=np.float32,
    )


def check(name, got, expected, receivers):
    """got: this rank's result (None where it receives nothing); receivers: the ranks that do."""
    global native_differences
    bits = got.tobytes() if got is not None else None
    everyone = comm.allgather(bits)
    results = [everyone[r] for r in receivers]
    if any(b != results[0] for b in results):
        failures.append(f"{name}: results differ between ranks {receivers}")
    if got is None:
        return
    differ = np.flatnonzero(got.view(f"u{got.itemsize}") != expected.view(f"u{expected.itemsize}"))
    if len(differ) and NATIVE:
        native_differences += len(differ)
    elif len(differ):
        i = differ[0]
        fmt = "<d" if got.dtype == np.float64 else "<f"
        hexes = lambda x: struct.pack(fmt, x)[::-1].hex()
        failures.append(
            f"{name}: rank {rank}: {len(differ)} of {COUNT} elements differ from the exact sum; "
            f"element {i}: expected 0x{hexes(expected[i])} ({float(expected[i]).hex()}), "
            f"got 0x{hexes(got[i])} ({float(got[i]).hex()})")


def main():
    for dtype, mpi_type in ((np.float64, MPI.DOUBLE), (np.float32, MPI.FLOAT)):
        data = contributions(dtype)
        mine = data[rank].copy()
        total = exact_sums(data, size)
        kind = np.dtype(dtype).name

        # The data is order-sensitive: two fold orders give different sums somewhere.
        forward = data[0].copy()
        for r in range(1, size):
            forward = forward + data[r]
        backward = data[size - 1].copy()
        for r in range(size - 2, -1, -1):
            backward = backward + data[r]
        if size >= 3 and not np.any(forward != backward):
            failures.append(f"{kind}: test data is not order-sensitive")

        recv = np.full(COUNT, -1, dtype=dtype)
        comm.Allreduce(mine, recv, op=MPI.SUM)
        check(f"Allreduce {kind}", recv, total, range(size))

        recv = mine.copy()
        comm.Allreduce(MPI.IN_PLACE, [recv, mpi_type], op=MPI.SUM)
        check(f"Allreduce IN_PLACE {kind}", recv, total, range(size))

        for root in range(size):
            recv = np.full(COUNT, -1, dtype=dtype) if rank == root else None
            comm.Reduce(mine, recv, op=MPI.SUM, root=root)
            check(f"Reduce root={root} {kind}", recv, total, [root])

        recv = np.full(COUNT, -1, dtype=dtype)
        comm.Scan(mine, recv, op=MPI.SUM)
        check(f"Scan {kind}", recv, exact_sums(data, rank + 1), [rank])

        recv = np.full(COUNT, -1, dtype=dtype)
        request = comm.Iallreduce(mine, recv, op=MPI.SUM)
        request.Wait()
        check(f"Iallreduce+Wait {kind}", recv, total, range(size))

    if NATIVE:
        counts = comm.gather(native_differences, root=0)
        if rank == 0:
            print(f"mpi4py_sum: native: {sum(counts)} element results differ from the exact sum "
                  f"(allowed with --native)")
    all_failures = comm.gather(failures, root=0)
    if rank == 0:
        flat = [f for per_rank in all_failures for f in per_rank]
        for f in flat:
            print(f"FAIL: {f}")
        print(f"mpi4py_sum: np={size}: {'ok' if not flat else f'{len(flat)} failures'}")
        sys.stdout.flush()
    return 1 if failures else 0


if __name__ == "__main__":
    status = main()
    status = comm.allreduce(status, op=MPI.MAX)
    sys.exit(status)
