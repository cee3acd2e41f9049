#!/usr/bin/env bash
# Scale, counted (issue 19): what one MPI_Allreduce costs a rank at np=32 under the shim, with
# REPROD_ROUTE left to choose (auto must take the fixed route there), against the same call
# natively, counted by Open MPI's pml monitoring: per call, the most any rank sends, in
#   messages <= 2 x native + 4,  peers <= 2 x native + 2,  bytes <= 3 x native,
# for float and double at 8 B, 4 KiB and 1 MiB. Prints the table.
#
# tests/mpi/monitor_job.c makes the calls and nothing else; the monitoring writes one file per
# rank at MPI_Finalize (Open MPI 4.1 unregisters the pml monitoring's MPI_T variables when the
# component steps aside for ob1, so its files are what can be read).
. tests/lib.sh

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

program=$BUILD/tests/mpi/monitor_job
[ -x "$program" ] || fail "$program is not built"
ompi_info 2>/dev/null | grep -q 'MCA pml: monitoring' ||
    skip "this Open MPI has no pml monitoring component"

NP=32 CALLS=2
monitoring=(--mca btl self,vader --mca pml_monitoring_enable 1 --mca pml_monitoring_enable_output 3)

# count KIND TYPE BYTES [ARGS...]: "messages peers bytes" per call, the most of any rank.
count() {
    local kind=$1 type=$2 bytes=$3
    shift 3
    local dir=$out/$kind.$type.$bytes
    mkdir -p "$dir"
    run_mpi "$NP" "${monitoring[@]}" --mca pml_monitoring_filename "$dir/prof" "$@" \
        "$program" "$type" "$bytes" "$CALLS" >"$dir/stdout" 2>"$dir/stderr" ||
        fail "$kind $type $bytes B: $(head -c 2000 "$dir/stderr")"
    local files
    files=$(ls "$dir"/prof.*.prof 2>/dev/null | wc -l)
    [ "$files" -eq "$NP" ] || fail "$kind $type $bytes B: $files monitoring files of $NP"
    # E (and I, when collectives are told apart) lines: rank, peer, "<n> bytes", "<n> msgs sent".
    awk -F'\t' -v calls="$CALLS" '
        $1 == "E" || $1 == "I" { m[$2] += $5 + 0; b[$2] += $4 + 0; if ($5 + 0 > 0) seen[$2 SUBSEP $3] = 1 }
        END {
            for (k in seen) { split(k, a, SUBSEP); p[a[1]]++ }
            for (r in m) { if (m[r] > M) M = m[r]; if (b[r] > B) B = b[r]; if (p[r] > P) P = p[r] }
            printf "%d %d %d\n", M / calls, P, B / calls
        }' "$dir"/prof.*.prof
}

printf '%-7s %8s | %28s | %28s\n' type bytes "native messages/peers/bytes" "shim messages/peers/bytes"
failures=""
for type in float double; do
    for bytes in 8 4096 1048576; do
        read -r nm np_ nb < <(count native "$type" "$bytes")
        read -r sm sp sb < <(count shim "$type" "$bytes" -x LD_PRELOAD="$PRELOAD" -x REPROD_VERBOSE=2)
        printf '%-7s %8s | %28s | %28s\n' "$type" "$bytes" "$nm / $np_ / $nb" "$sm / $sp / $sb"
        grep -q 'MPI_Allreduce: exact.*(fixed: ' "$out/shim.$type.$bytes/stderr" ||
            failures+="$type $bytes B: the automatic route did not take the fixed route at np=$NP ($(grep -m1 'MPI_Allreduce: ' "$out/shim.$type.$bytes/stderr"));"$'\n'
        [ "$sm" -le $((2 * nm + 4)) ] || failures+="$type $bytes B: $sm messages > 2 x $nm + 4"$'\n'
        [ "$sp" -le $((2 * np_ + 2)) ] || failures+="$type $bytes B: $sp peers > 2 x $np_ + 2"$'\n'
        [ "$sb" -le $((3 * nb)) ] || failures+="$type $bytes B: $sb bytes > 3 x $nb"$'\n'
        [ "$nm" -gt 0 ] || failures+="$type $bytes B: no native message counted"$'\n'
    done
done
[ -z "$failures" ] || fail "np=$NP, per call:"$'\n'"$failures"
ok "np=$NP, per MPI_Allreduce: messages <= 2 x native + 4, peers <= 2 x native + 2, bytes <= 3 x native (the fixed route, chosen automatically)"
