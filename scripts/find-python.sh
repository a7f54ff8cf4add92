#!/usr/bin/env bash
# find-python.sh - print the path of a CPython interpreter.
#
#   scripts/find-python.sh 3.13           # python3.13 on PATH, else pyenv's
#   scripts/find-python.sh /usr/bin/python3
#
# A version is looked up as python3.X on PATH, then as the newest pyenv
# installation of it; with pyenv present and no installation, pyenv
# installs it (minutes: it compiles CPython).  Exits 1 with a message when
# there is no such Python.
set -euo pipefail
[ $# = 1 ] || { echo "usage: $0 VERSION|PYTHON" >&2; exit 2; }
want=$1
case $want in
*/*)
    [ -x "$want" ] || { echo "find-python: $want is not executable" >&2; exit 1; }
    echo "$want"; exit 0 ;;
esac

is_version() {  # is_version PYTHON: prints its path when it is $want
    local v
    v=$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
    [ "$v" = "$want" ] && "$1" -c 'import sys; print(sys.executable)'
}

for cand in "python$want" python3; do
    if p=$(command -v "$cand" 2>/dev/null) && is_version "$p"; then exit 0; fi
done
root=${PYENV_ROOT:-$HOME/.pyenv}
if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root)
fi
newest=$(ls -d "$root"/versions/"$want".* 2>/dev/null | grep -E "/$want\.[0-9]+$" | sort -V | tail -n 1 || true)
if [ -z "$newest" ] && command -v pyenv >/dev/null 2>&1; then
    echo "find-python: installing CPython $want with pyenv (compiles it)" >&2
    pyenv install -s "$want" >&2
    newest=$(ls -d "$root"/versions/"$want".* 2>/dev/null | grep -E "/$want\.[0-9]+$" | sort -V | tail -n 1 || true)
fi
if [ -n "$newest" ] && is_version "$newest/bin/python$want"; then exit 0; fi
echo "find-python: no CPython $want found (looked for python$want on PATH and in $root/versions);" \
     "install it or name the interpreter" >&2
exit 1
