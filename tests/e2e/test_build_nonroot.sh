#!/usr/bin/env bash
# e2e: the login-node route, as a user without root: a throwaway user (useradd; removed at the
# end) with a copy of the checkout and the installed packages, LibTorch reachable only through
# CMAKE_PREFIX_PATH (the venv's torch bind-mounted at two paths, A and B, in a private mount
# namespace, as a site module would provide it):
#   1. `launch/setup.sh --no-install` without LibTorch: exit 1, one "missing LibTorch" line naming
#      CMAKE_PREFIX_PATH, nothing else missing, nothing installed, no build/;
#   2. `--no-install --configure-only` with CMAKE_PREFIX_PATH=A: configures build/ against A;
#      `cmake --build build --target <one library object>` compiles (LibTorch + MPI headers);
#   3. the same with CMAKE_PREFIX_PATH=B reconfigures: Torch_DIR and TORCH_LIBRARY now under B.
# Skips ("SKIPPED: ...") without root, useradd/runuser or a private mount namespace.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=${HPCTRAIN_PYTHON:-${HPCTRAIN_HOME:-$HOME/.cache/hpctrain}/venv/bin/python}
[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root to create a throwaway user"; exit 0; }
for c in useradd userdel runuser unshare mount; do command -v $c >/dev/null || { echo "SKIPPED: no $c"; exit 0; }; done
unshare --mount --propagation private true 2>/dev/null || { echo "SKIPPED: no private mount namespace"; exit 0; }
TORCH_CM=$("$PY" -c "import torch.utils; print(torch.utils.cmake_prefix_path)") || fail "no torch in $PY"
TORCH_ROOT=$(cd "$TORCH_CM/../.." && pwd)  # .../site-packages/torch
U=hpctrain-nr$$
NR=$(mktemp -d /tmp/hpctrain-nonroot.XXXXXX)
chmod 755 "$NR"
cleanup() { set +e; userdel "$U" 2>/dev/null; rm -rf "$NR" "$WORK"; }
trap cleanup EXIT
useradd -M -d "$NR/home" -s /bin/bash "$U" || fail "useradd $U"
mkdir -p "$NR/home" "$NR/src" "$NR/torchA" "$NR/torchB"
# The checkout's files (tracked and untracked, not ignored: no build directories).
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$SRC" && git ls-files -z -co --exclude-standard | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$NR/src"
else
  (cd "$SRC" && tar cf - --exclude='./build*' .) | tar xf - -C "$NR/src"
fi
chown -R "$U" "$NR/home" "$NR/src"
OBJ=src/CMakeFiles/hpctrain_lib.dir/runtime/threads.cpp.o
cat >"$NR/as_user.sh" <<SH
set -uo pipefail
cd "$NR/src"
export HOME="$NR/home" HPCTRAIN_HOME="$NR/home/.cache/hpctrain" PATH=/usr/local/bin:/usr/bin:/bin
echo "== 1"; bash launch/setup.sh --no-install; echo "rc=\$?"; [ -e build ] && echo "build/ exists" || echo "no build/"
echo "== 2"; CMAKE_PREFIX_PATH="$NR/torchA/share/cmake" bash launch/setup.sh --no-install --configure-only >"$NR/home/c2.log" 2>&1; echo "rc=\$?"; cp build/CMakeCache.txt "$NR/home/cache2.txt"
t=\$SECONDS; cmake --build build --target $OBJ >"$NR/home/b2.log" 2>&1; echo "build rc=\$? in \$((SECONDS - t)) s"
echo "== 3"; CMAKE_PREFIX_PATH="$NR/torchB/share/cmake" bash launch/setup.sh --no-install --configure-only >"$NR/home/c3.log" 2>&1; echo "rc=\$?"
SH
t0=$SECONDS
timeout 300 unshare --mount --propagation private bash -c "
  mount --bind '$TORCH_ROOT' '$NR/torchA' && mount --bind '$TORCH_ROOT' '$NR/torchB' &&
  runuser -u '$U' -- bash '$NR/as_user.sh'" >"$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt"; fail "the user's session failed"; }
out=$(cat "$WORK/out.txt")
part() { sed -n "/^== $1\$/,/^== /p" "$WORK/out.txt"; }
p1=$(part 1) p2=$(part 2) p3=$(part 3)
# 1. LibTorch missing: reported with its variable, exit 1, nothing else missing or installed.
grep <<<"$p1" -q "^rc=1$" || { echo "$out"; fail "1: --no-install without LibTorch did not exit 1"; }
[ "$(grep <<<"$p1" -c '^\[setup\] missing ')" = 1 ] && grep <<<"$p1" -q "^\[setup\] missing LibTorch: set CMAKE_PREFIX_PATH" ||
  { echo "$out"; fail "1: expected exactly one 'missing LibTorch: set CMAKE_PREFIX_PATH' line"; }
grep <<<"$p1" -qi "installing" && { echo "$out"; fail "1: --no-install installed something"; }
grep <<<"$p1" -q "^no build/$" || { echo "$out"; fail "1: a failed check made build/"; }
ok "1. --no-install without LibTorch: '$(grep <<<"$p1" '^\[setup\] missing' | cut -c1-110)...', exit 1, nothing installed"
# 2. configured against A as the user, one object built.
grep <<<"$p2" -q "^rc=0$" || { cat "$NR/home/c2.log"; fail "2: --no-install --configure-only with CMAKE_PREFIX_PATH=A failed"; }
grep -q "^Torch_DIR:PATH=$NR/torchA/" "$NR/home/cache2.txt" || { grep Torch_DIR "$NR/home/cache2.txt"; fail "2: Torch_DIR not under A"; }
grep <<<"$p2" -q "^build rc=0 " || { tail -30 "$NR/home/b2.log"; fail "2: building $OBJ as the user failed"; }
[ "$(stat -c %U "$NR/src/build/$OBJ")" = "$U" ] || fail "2: the object is not the user's"
ok "2. as user $U: setup.sh --no-install --configure-only against LibTorch at A, then $OBJ built ($(sed <<<"$p2" -n 's/^build rc=0 //p'))"
# 3. another LibTorch: reconfigured, the cache follows it.
grep <<<"$p3" -q "^rc=0$" || { cat "$NR/home/c3.log"; fail "3: reconfigure with B failed"; }
grep -q "reconfiguring with $NR/torchB" "$NR/home/c3.log" || { cat "$NR/home/c3.log"; fail "3: setup.sh did not say it reconfigures"; }
for v in Torch_DIR TORCH_LIBRARY; do
  grep -q "^$v:[A-Z]*=$NR/torchB/" "$NR/src/build/CMakeCache.txt" || { grep "^$v:" "$NR/src/build/CMakeCache.txt"; fail "3: $v still points at the old LibTorch"; }
done
! grep -q "$NR/torchA/" "$NR/src/build/CMakeCache.txt" || { grep "$NR/torchA/" "$NR/src/build/CMakeCache.txt" | head; fail "3: cache entries still under A"; }
ok "3. CMAKE_PREFIX_PATH=B: reconfigured; Torch_DIR, TORCH_LIBRARY and every other cache entry now under B"
echo "test_build_nonroot: $((SECONDS - t0)) s"
