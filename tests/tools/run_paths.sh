#!/usr/bin/env bash
# `reprod run` and `reprod doctor` from a build whose path holds a space or a colon: the loader
# splits LD_PRELOAD at both, so such a path would run the job without the shim, silently.
# Both refuse (exit 2, one line saying why) and never run the command; the same build copied
# to a plain path runs the command under the shim.
. tests/lib.sh

unset RANK OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK SLURM_PROCID
PROBE=$BUILD/tests/progs/launcher_probe
[ -x "$PROBE" ] || fail "$PROBE is not built"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
native=$("$PROBE" | grep '^rand: ')

copy_build() { # DIRECTORY: the reprod binary and the shim it preloads, the one beside it
    mkdir -p "$1"
    cp "$BUILD/reprod" "$BUILD/libreprod_shim.so" "$1/"
}

copy_build "$dir/plain"
out=$(unset LD_PRELOAD; "$dir/plain/reprod" run -- "$PROBE") || fail "reprod run from a plain path failed"
grep -q '^rand: ' <<<"$out" && ! grep -qxF "$native" <<<"$out" ||
    fail "reprod run from a plain path: srand(42) not re-derived: $out"
ok "a copy of the build in a plain path runs the command under the shim"

for name in "with space" "with:colon"; do
    copy_build "$dir/$name"
    case $name in *' '*) what="a space" ;; *) what="a colon" ;; esac
    for command in run doctor; do
        out=$(unset LD_PRELOAD; "$dir/$name/reprod" $command -- "$PROBE" 2>"$dir/err")
        status=$?
        [ $status -eq 2 ] || fail "reprod $command from '$dir/$name' exited $status: $out $(cat "$dir/err")"
        [ -z "$out" ] || fail "reprod $command from '$dir/$name' ran the command: $out"
        grep -qxF "reprod: the shim's path $dir/$name/libreprod_shim.so contains $what, where the loader splits LD_PRELOAD: the command would run without the shim; move the build to a path without spaces or colons" "$dir/err" ||
            fail "reprod $command from '$dir/$name': $(cat "$dir/err")"
    done
done
ok "reprod run and reprod doctor from a path with a space or a colon refuse, saying why"
