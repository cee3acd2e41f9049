#!/usr/bin/env bash
# REPROD_LOG and REPROD_TRACE on a machine shared with a hostile user (nobody, planting what
# root then runs into): no symbolic link is followed in any component, whoever made it; no
# directory of another user's is walked through (nor created in); a log is never appended to
# another user's file or to a second name of some other file; a host name (%h) never adds a
# directory. Each refusal is one warning, the messages going to stderr, and the victim stays
# untouched. /dev/stderr and /dev/fd/2 are the named exceptions: the process's own stderr.
# The links are planted in directories that are not sticky, so that the kernel's own guard
# (fs.protected_symlinks, protected_regular, which apply in sticky world-writable directories
# only) cannot be what stops them.
. tests/lib.sh

PROBE=$BUILD/tests/progs/lifecycle_probe
[ -x "$PROBE" ] || fail "$PROBE is not built"
if [ "$(id -u)" != 0 ]; then
    skip "not root: cannot plant files as another user"
fi
as_nobody() {
    setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
victim=$dir/victim # root's, root-only: what a planted link points to
mkdir -m 700 "$victim"
echo "a secret" >"$victim/secret"
mkdir -m 755 "$dir/theirs" "$dir/mine"
chown nobody "$dir/theirs" # another user's directory, not sticky
as_nobody ln -s "$victim" "$dir/theirs/evil" || fail "nobody cannot plant a link"
as_nobody ln -s "$victim" "$dir/theirs/evil2"

probe() { # probe NAME=VALUE...: the probe (a seeding call) at REPROD_VERBOSE=2; stderr in $dir/err
    bounded 20 env REPROD_VERBOSE=2 "$@" LD_PRELOAD="$PRELOAD" "$PROBE" calls \
        >/dev/null 2>"$dir/err" || fail "the probe failed under $*: $(cat "$dir/err")"
}
victim_untouched() { # victim_untouched WHAT
    [ "$(ls "$victim")" = secret ] && [ "$(cat "$victim/secret")" = "a secret" ] ||
        fail "$1: the victim directory was written: $(ls -la "$victim")"
}
log_refused() { # log_refused LOG WHY WHAT: one warning naming WHY, messages on stderr
    probe REPROD_LOG="$1"
    [ "$(grep -c 'warning: REPROD_LOG' "$dir/err")" -eq 1 ] || fail "REPROD_LOG=$1 ($3): not one warning: $(cat "$dir/err")"
    grep -q "warning: REPROD_LOG: cannot use .*: $2.*; messages go to stderr" "$dir/err" ||
        fail "REPROD_LOG=$1 ($3): the warning does not say '$2': $(cat "$dir/err")"
    grep -q "seed: srand 7" "$dir/err" || fail "REPROD_LOG=$1 ($3): messages lost: $(cat "$dir/err")"
    victim_untouched "REPROD_LOG $3"
    ok "REPROD_LOG $3: $(grep 'warning: REPROD_LOG' "$dir/err" | cut -c1-150)"
}
trace_refused() { # trace_refused DIR WHY WHAT
    probe REPROD_TRACE="$1"
    grep -q "warning: REPROD_TRACE: cannot use the directory .*: $2.*; no trace" "$dir/err" ||
        fail "REPROD_TRACE=$1 ($3): no warning saying '$2': $(cat "$dir/err")"
    victim_untouched "REPROD_TRACE $3"
    ok "REPROD_TRACE $3: refused"
}

# The issue's case: a link to a root-only directory, planted in the directories of the path.
log_refused "$dir/theirs/evil/reprod.log" "$dir/theirs is another user's directory (uid [0-9]*)" \
    "through nobody's link in nobody's directory"
trace_refused "$dir/theirs/evil2/traces" "$dir/theirs is another user's directory" \
    "through nobody's link in nobody's directory"

# No link is followed in any component, even one root made in root's directory.
mkdir -m 755 "$dir/real"
ln -s "$dir/real" "$dir/mine/link"
log_refused "$dir/mine/link/reprod.log" "$dir/mine/link is a symbolic link, and none is followed" \
    "through a link in a directory component"
trace_refused "$dir/mine/link/traces" "$dir/mine/link is a symbolic link" "through a link"
[ -z "$(ls "$dir/real")" ] || fail "a file was made through a link: $(ls "$dir/real")"

# Another user's world-writable directory, above a directory that would be root's own.
mkdir -m 777 "$dir/shared"
chown nobody "$dir/shared"
trace_refused "$dir/shared/mine/traces" "$dir/shared is another user's directory" \
    "under nobody's world-writable directory"
[ ! -e "$dir/shared/mine" ] || fail "a directory was created inside nobody's directory"
log_refused "$dir/shared/reprod.log" "$dir/shared is another user's directory" \
    "in nobody's world-writable directory"
[ ! -e "$dir/shared/reprod.log" ] || fail "a log was created inside nobody's directory"

# Files in root's own directory: another user's file, a second name of a root-only file.
mkdir -m 755 "$dir/logs"
echo "nobody's file" >"$dir/logs/theirs.log"
chown nobody "$dir/logs/theirs.log"
log_refused "$dir/logs/theirs.log" "it is another user's file (uid [0-9]*)" "onto nobody's file"
[ "$(cat "$dir/logs/theirs.log")" = "nobody's file" ] || fail "nobody's file was appended to"
ln "$victim/secret" "$dir/logs/linked.log" # as a user could where protected_hardlinks is 0
log_refused "$dir/logs/linked.log" "it has 2 hard links" "onto a second name of a root-only file"
rm "$dir/logs/linked.log"

# A sticky world-writable directory (like /tmp): nobody's link and nobody's file are refused,
# a new file of root's own is fine.
mkdir -m 1777 "$dir/tmp"
as_nobody ln -s "$victim" "$dir/tmp/evil"
as_nobody sh -c "echo \"nobody's file\" >'$dir/tmp/theirs.log'"
log_refused "$dir/tmp/evil/reprod.log" "$dir/tmp/evil is a symbolic link" "through a link in a sticky directory"
log_refused "$dir/tmp/theirs.log" "it is another user's file\|Permission denied" "onto nobody's file in a sticky directory"
probe REPROD_LOG="$dir/tmp/fresh.log"
[ ! -s "$dir/err" ] && grep -q "seed: srand 7" "$dir/tmp/fresh.log" ||
    fail "a new log in a sticky directory was refused: $(cat "$dir/err")"
ok "a new log in a sticky world-writable directory is written"

# %h never adds a directory: a host name with a slash is refused (the host name comes from a
# stand-in for gethostname preloaded before the shim).
with_host_name "../victim/x" REPROD_VERBOSE=2 REPROD_LOG="$dir/logs/%h.log" "$PROBE" calls \
    >/dev/null 2>"$dir/err" || fail "probe: $(cat "$dir/err")"
grep -q "warning: REPROD_LOG: cannot use $dir/logs/%h.log: the host name \.\./victim/x (%h) would add or leave a directory" "$dir/err" ||
    fail "a host name with a slash was not refused: $(cat "$dir/err")"
victim_untouched "%h with a slash"
# Nor does it leave one: an empty host name between the pattern's own dots would make "..".
mkdir -p "$dir/logs/sub"
with_host_name "" REPROD_VERBOSE=2 REPROD_LOG="$dir/logs/sub/.%h./up.log" "$PROBE" calls \
    >/dev/null 2>"$dir/err" || fail "probe: $(cat "$dir/err")"
[ ! -e "$dir/logs/up.log" ] && grep -q "the host name  (%h) would add or leave a directory" "$dir/err" ||
    fail "an empty host name made '..' of '.%h.': $(ls "$dir/logs") $(cat "$dir/err")"
ok "a host name that would add or leave a directory is refused: $(grep warning "$dir/err" | cut -c1-120)"

# The named exceptions: the process's own stderr, without a warning.
for name in /dev/stderr /dev/fd/2; do
    probe REPROD_LOG=$name
    ! grep -q warning "$dir/err" && grep -q "seed: srand 7" "$dir/err" ||
        fail "REPROD_LOG=$name: $(cat "$dir/err")"
done
ok "REPROD_LOG=/dev/stderr and /dev/fd/2 write to stderr, without a warning"
