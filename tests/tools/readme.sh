#!/usr/bin/env bash
# README.md is what a new user follows, so it is tested the way one follows it:
# - its table of settings is the shim's own: between its "settings: begin" and "settings: end"
#   lines it holds exactly what `build/reprod settings --markdown` prints (`make readme`);
# - every shell command it shows runs as written: its ```sh blocks, in README order, in one
#   shell, from the repository root, with Open MPI's permission to run as root left to what
#   README says (CI runs as root, on 2 cores), except the commands SKIPPED lists below, each
#   with why; every other fenced block names its language, and none is indented instead;
# - every repository path that README.md and docs/*.md name in backquotes exists, and every
#   link between them reaches a file and, with #, a heading of it.
# The commands get README_TIMEOUT seconds in all (300 by default; about 30 on an idle 2-core
# machine). Under a sanitizer run they are skipped: they name the plain build.
. tests/lib.sh

README=$ROOT/README.md
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# ---- The table of settings ---------------------------------------------------------------

[ "$(grep -c '^<!-- settings: begin' "$README")" = 1 ] && [ "$(grep -c '^<!-- settings: end' "$README")" = 1 ] ||
    fail "README.md needs one '<!-- settings: begin' and one '<!-- settings: end' line"
"$BUILD/reprod" settings --markdown >"$dir/expected" || fail "build/reprod settings --markdown failed"
sed -n '/^<!-- settings: begin/,/^<!-- settings: end/p' "$README" | sed '1d;$d' >"$dir/actual"
diff -u "$dir/expected" "$dir/actual" >"$dir/settings.diff" ||
    fail "README's table of settings is not the shim's (run make readme):
$(cat "$dir/settings.diff")"
ok "README's table of settings is what build/reprod settings --markdown prints ($(($(wc -l <"$dir/expected") - 2)) settings)"

# ---- Code blocks: a language each, ```sh ones are commands -----------------------------------

# Every fence names one of these; an indented block (a line of 4 spaces after a blank line,
# outside a fence) is not allowed: it would hide a command from this test.
awk -v allowed=" sh text c python " '
    /^```/ {
        if (!fenced) {
            language = substr($0, 4)
            if (index(allowed, " " language " ") == 0 || language == "")
                printf "README.md line %d: a code block of language \"%s\" (use one of:%s)\n", NR, language, allowed
            fenced = 1
        } else if ($0 == "```") fenced = 0
        previous = $0
        next
    }
    !fenced && previous == "" && /^    [^ ]/ { printf "README.md line %d: an indented code block (fence it: ```sh or ```text)\n", NR }
    { previous = $0 }
    END { if (fenced) print "README.md: a code block is not closed" }
' "$README" >"$dir/blocks"
[ ! -s "$dir/blocks" ] || fail "$(cat "$dir/blocks")"

# The commands of the ```sh blocks, one a line as "LINE<tab>COMMAND": a line ending in a
# backslash continues on the next one, as in a shell.
awk '
    /^```sh$/ { inside = 1; next }
    /^```/ { inside = 0; next }
    inside {
        if (pending == "") start = NR
        if (sub(/\\$/, "")) { pending = pending $0; next }
        line = pending $0
        pending = ""
        if (line ~ /^[[:space:]]*$/) next
        printf "%d\t%s\n", start, line
    }
' "$README" >"$dir/commands"

# Commands a test cannot run, each with why. A skipped `make TARGET` must still name a target of
# the Makefile, and a path in a skipped command must exist.
declare -A SKIPPED=(
    ["make test"]="every test, this one included: make test is what runs this script"
    ["make deps"]="installs Debian packages (as root): the machine's business, not a test's"
    ["make test-unit"]="the unit tests: make test runs them"
    ["make test-scripts ONLY=tests/runtime/settings.sh"]="another test script: make test runs it"
    ["make demo"]="2 to 3 minutes of training runs; .ci/run runs it after make test"
    ["tools/run-demo --check"]="a minute of training runs; make demo, which .ci/run runs, checks more"
    ["make bench"]="minutes of timing, which needs a quiet machine"
    ["make fuzz"]="100000 iterations; make test runs 2000 of them (tests/engine/fuzz_engine.sh)"
    ["make test-sanitize"]="the whole suite again, instrumented (about 11 minutes); .ci/run runs it"
    ["make test-tsan"]="the scripts again under ThreadSanitizer; .ci/run runs it"
    ["make test-gpu"]="needs a GPU (tests/gpu/run.sh)"
    ["srun -n 4 --export=ALL,LD_PRELOAD=\$PWD/build/libreprod_shim.so build/examples/solver 64"]="no Slurm on a test machine"
    ["srun -n 4 build/reprod run -- build/examples/solver 64"]="no Slurm on a test machine"
)
declare -A seen=()
{
    echo 'cd "$1" || exit 1'
    # As written means without the permission tests/lib.sh gives every other test.
    echo 'unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM'
    echo 'set -eE'
    echo 'trap '\''echo "FAIL: README.md line $readme_line, exit status $?: $readme_command" >&2'\'' ERR'
} >"$dir/script"
count=0
while IFS=$'\t' read -r line command; do
    bare=$(sed 's/[[:space:]]\{1,\}#.*$//; s/[[:space:]]*$//' <<<"$command")
    if [ -n "${SKIPPED[$bare]+set}" ]; then
        seen[$bare]=1
        if [[ $bare == make\ * ]]; then
            target=${bare#make }
            target=${target%% *}
            grep -Eq "^([^#:=]*[[:space:]])?$target([[:space:]][^:=]*)?:" Makefile ||
                fail "README.md line $line: skipped '$bare', but the Makefile has no target $target"
        fi
        for word in $bare; do
            word=${word#*=}
            [[ $word == tests/* || $word == tools/* || $word == examples/* ]] || continue
            [ -e "$word" ] || fail "README.md line $line: '$bare' names $word, which does not exist"
        done
        continue
    fi
    count=$((count + 1))
    printf 'readme_line=%d readme_command=%q\n' "$line" "$command" >>"$dir/script"
    echo 'printf "\$ %s\n" "$readme_command"' >>"$dir/script"
    printf '%s\n' "$command" >>"$dir/script"
done <"$dir/commands"
for command in "${!SKIPPED[@]}"; do
    [ -n "${seen[$command]+set}" ] || fail "SKIPPED lists '$command', which README.md no longer shows"
done
[ "$count" -ge 10 ] || fail "only $count commands found in README.md's sh blocks: is the extraction broken?"

# ---- Paths and links in README.md and docs/ ------------------------------------------------------

# The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens.
slug() {
    sed 's/^#* *//; s/`//g' | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}
problems=()
for file in README.md docs/*.md; do
    base=$(dirname "$file")
    # Paths of the repository in backquotes (globs and build outputs aside).
    for path in $(grep -o '`[^` ]*`' "$file" | tr -d '`' |
        grep -E '^(include|shim|hooks|tests|tools|bench|examples|docs)/[A-Za-z0-9_./-]*$' | sort -u); do
        [ -e "$path" ] || problems+=("$file names $path, which does not exist")
    done
    # Links to files of the repository, and their anchors.
    for link in $(grep -o '](\([^)]*\))' "$file" | sed 's/^](//; s/)$//' | grep -v '^[a-z]*://' | sort -u); do
        target=${link%%#*}
        anchor=${link#"$target"}
        anchor=${anchor#\#}
        [ -n "$target" ] && path=$base/$target || path=$file
        if [ ! -e "$path" ]; then
            problems+=("$file links to $link: no file $path")
        elif [ -n "$anchor" ] && ! grep '^#' "$path" | slug | grep -qx -- "$anchor"; then
            problems+=("$file links to $link: $path has no heading with the anchor #$anchor")
        fi
    done
done
[ ${#problems[@]} -eq 0 ] || fail "$(printf '%s\n' "${problems[@]}")"
ok "the paths and links of README.md and docs/*.md reach what they name"

# ---- Run them as written -----------------------------------------------------------------------

if sanitized; then
    skip_part "README's commands: they name the plain build (build/libreprod_shim.so), not the" \
        "instrumented shim under test"
else
    started=$SECONDS
    bounded "${README_TIMEOUT:-300}" bash "$dir/script" "$ROOT" </dev/null >"$dir/log" 2>&1
    status=$?
    [ "$status" -ne 124 ] || fail "README's commands $(status_text "$status" "${README_TIMEOUT:-300}"):
$(tail -n 30 "$dir/log")"
    [ "$status" -eq 0 ] || fail "a command of README.md failed as written:
$(tail -n 40 "$dir/log")"
    ok "README.md's $count shell commands ran as written ($((SECONDS - started)) s); skipped, each with" \
        "its reason in this script: ${#SKIPPED[@]}"
fi
