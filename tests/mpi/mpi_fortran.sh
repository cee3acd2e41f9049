#!/usr/bin/env bash
# Fortran codes (tests/fortran/sum.F90): `use mpi` and `use mpi_f08` programs built with Open
# MPI's and MPICH's mpif90 reduce real(4), real(8) and complex(8), with MPI_IN_PLACE, to the root
# and nonblocking. Open MPI's Fortran bindings call PMPI_Allreduce and PMPI_Wait* directly;
# MPICH's call MPI_Allreduce. Under the shim every result equals the MPFR oracle (each run checks
# every rotation of the contributions on the ranks), and the digests are identical across
# allreduce algorithms, the two bindings and the two libraries. Natively the oracle check fails
# (the test shows the problem).
. tests/lib.sh

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
FORTRAN=$BUILD/tests/fortran

for family in openmpi mpich; do
    for binding in mpi f08; do
        [ -x "$FORTRAN/$family/sum_$binding" ] || fail "$FORTRAN/$family/sum_$binding is not built"
    done
done

# Natively, with 3 ranks, the sums are not all exact.
status=0
run_mpi 3 "$FORTRAN/openmpi/sum_mpi" >"$out/native" 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q '^ *FAIL' "$out/native" ||
    fail "natively the Fortran sums were all exact ($(status_text "$status")): the data does not show the problem"
ok "natively (Open MPI, use mpi, np=3): native differs, as expected:" \
    "$(grep -m1 -o '[0-9]* wrong results' "$out/native")"

for np in 3 4; do
    for binding in mpi f08; do
        for algorithm in 1 3 4 6; do
            tuned=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$algorithm")
            run_mpi_shim "$np" "${tuned[@]}" "$FORTRAN/openmpi/sum_$binding" >"$out/openmpi.$binding.$np.$algorithm" 2>&1 ||
                fail "Open MPI use $binding np=$np algorithm $algorithm under the shim: $(grep -m5 -E 'FAIL|rror' "$out/openmpi.$binding.$np.$algorithm")"
        done
        for algorithm in recursive_doubling reduce_scatter_allgather nb; do
            chosen=(-env MPIR_CVAR_DEVICE_COLLECTIVES none -env MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM "$algorithm")
            run_mpich_shim "$np" "${chosen[@]}" "$FORTRAN/mpich/sum_$binding" >"$out/mpich.$binding.$np.$algorithm" 2>&1 ||
                fail "MPICH use $binding np=$np $algorithm under the shim: $(grep -m5 -E 'FAIL|rror' "$out/mpich.$binding.$np.$algorithm")"
        done
    done
    # One digest per case across algorithms, bindings, libraries and rotations.
    cases=$(cat "$out"/*.*."$np".* | grep '^case ' | sort -u)
    [ "$(cut -d' ' -f2 <<<"$cases" | sort -u | wc -l)" -eq "$(wc -l <<<"$cases")" ] ||
        fail "np=$np: a case has several results: $cases"
    ok "np=$np: $(wc -l <<<"$cases") cases, one result each for use mpi and use mpi_f08, 4 Open MPI and 3 MPICH algorithms, every rotation"
done
