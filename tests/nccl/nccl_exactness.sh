#!/usr/bin/env bash
# NCCL over the host-memory stand-ins (build/standins/): the same contributions on 1 to 8
# ranks, in several rotations, under NCCL_ALGO Ring and Tree and 1 or 32 channels. Under the
# shim every result equals MPFR's (tests/nccl/exactness.c checks each element) and the
# configurations agree; natively they do not. The shim built without nvcc (host path) gives
# the same bits as the default build.
. tests/lib.sh

nccl_program exactness

# under_shim NP NAME ARGS...: run the program under the shim; it must report no wrong element.
under_shim() {
    local np=$1 name=$2
    shift 2
    run_mpi_shim "$np" -x LD_LIBRARY_PATH "$@" >"$out/$name" 2>"$out/err" ||
        fail "$name: $(head -c 3000 "$out/err") $(cat "$out/$name")"
    grep -q ' wrong 0 ' "$out/$name" || fail "$name: $(cat "$out/$name") $(head -c 2000 "$out/err")"
    grep -q ' distinct 1$' "$out/$name" || fail "$name: rotations disagree: $(cat "$out/$name")"
}

digest() {
    sed -n 's/.* digest \([0-9a-f]*\) .*/\1/p' "$out/$1"
}

# 1. Every case against the oracle.
ORACLE_RANKS="1 2 3" LARGE_RANKS="5 8" SWEEP_RANKS="3 8"
if sanitized; then ORACLE_RANKS="3" LARGE_RANKS="" SWEEP_RANKS="3"; fi
for np in $ORACLE_RANKS; do
    under_shim "$np" "oracle.$np" "$program"
    ok "np=$np: $(cat "$out/oracle.$np")"
done
for np in $LARGE_RANKS; do
    under_shim "$np" "large.$np" "$program" --quick --large
    ok "np=$np with counts past the small path: $(cat "$out/large.$np")"
done

# 2. Algorithms and channel counts: one digest under the shim, several natively.
for np in $SWEEP_RANKS; do
    for algorithm in Ring Tree; do
        for channels in 1 32; do
            config=(-x NCCL_ALGO=$algorithm -x NCCL_MAX_NCHANNELS=$channels)
            under_shim "$np" "shim.$np.$algorithm.$channels" "${config[@]}" "$program" --quick
            run_mpi "$np" -x LD_LIBRARY_PATH "${config[@]}" "$program" --quick --native \
                >"$out/native.$np.$algorithm.$channels" 2>"$out/err" ||
                fail "native np=$np $algorithm $channels: $(head -c 2000 "$out/err")"
        done
    done
    shim_digests=$(for f in "$out"/shim.$np.*; do digest "$(basename "$f")"; done | sort -u | wc -l)
    native_digests=$(for f in "$out"/native.$np.*; do digest "$(basename "$f")"; done | sort -u | wc -l)
    native_rotations=$(cat "$out"/native.$np.* | awk '{print $NF}' | sort -n | tail -1)
    [ "$shim_digests" -eq 1 ] || fail "np=$np: $shim_digests different results under the shim across Ring/Tree x 1/32 channels"
    [ "$native_digests" -gt 1 ] || [ "$native_rotations" -gt 1 ] ||
        fail "np=$np: natively every configuration and rotation agreed: the stand-in does not show the problem"
    ok "np=$np: Ring/Tree x 1/32 channels x 3 rotations: 1 result under the shim; natively $native_digests across configurations, up to $native_rotations across rotations"
done

# 3. The other settings: rounding toward -inf, and the rank-order fold.
under_shim 3 down -x REPROD_ROUNDING=down "$program" --quick --rounding down
under_shim 3 up -x REPROD_ROUNDING=up "$program" --quick --rounding up
ok "REPROD_ROUNDING=down and up: every element as MPFR rounds it"
run_mpi_shim 3 -x LD_LIBRARY_PATH -x REPROD_MODE=ordered "$program" --quick --ordered >"$out/ordered" 2>"$out/err" ||
    fail "ordered: $(head -c 2000 "$out/err")"
grep -q ' wrong 0 ' "$out/ordered" || fail "ordered: $(cat "$out/ordered") $(head -c 2000 "$out/err")"
ok "REPROD_MODE=ordered: the rank-order fold, element by element"

# 4. The shim built without nvcc reduces on the host, in stream order: the same bits. (A build
# without nvcc makes no such twin: its shim, tested above, is that build.)
if [ -n "${TEST_SHIM:-}" ]; then
    skip_part "the shim built without nvcc: the shim under test ($TEST_SHIM) has no such twin"
elif [ -f "$BUILD/nonvcc/libreprod_shim.so" ]; then
    run_mpi 3 -x LD_LIBRARY_PATH -x LD_PRELOAD="$BUILD/nonvcc/libreprod_shim.so" -x REPROD_VERBOSE=1 \
        "$program" --quick >"$out/nonvcc" 2>"$out/err" || fail "no-nvcc shim: $(head -c 2000 "$out/err")"
    grep -q ' wrong 0 ' "$out/nonvcc" || fail "no-nvcc shim: $(cat "$out/nonvcc")"
    [ "$(digest nonvcc)" = "$(digest shim.3.Ring.1)" ] ||
        fail "the no-nvcc shim's results differ from the default build's"
    grep -q "host" "$out/err" || fail "the no-nvcc shim did not say that it reduces on the host: $(head -c 1000 "$out/err")"
    ok "the shim built without nvcc: the same bits, and it says it reduces on the host"
fi
