#!/usr/bin/env bash
# e2e: the workstation launchers. `launch/local.sh -n 2 --oversubscribe -- train ...` trains end
# to end and gives bitwise the parameters of the same run under plain mpirun; launch/multinode.sh
# with a localhost hostfile takes -n from its slots and runs doctor on ranks 0/1 with local
# ranks 0/1; its argument errors exit 2 with a one-line message.
source "$(dirname "$0")/lib.sh"
SRC=${HPCTRAIN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export HPCTRAIN_BIN="$BIN"
D="$WORK/d"
run_np 1 data synthetic --out "$D" --n 512 --test-n 64 --classes 4 --height 12 --width 12 --seed 7 --noise 200 >/dev/null
common=(train --device cpu --model cnn --data "$D" --epochs 1 --batch-size 16 --lr 0.02 --seed 4 --log-every 8)

t0=$SECONDS
timeout 300 "$SRC/launch/local.sh" -n 2 --oversubscribe -- "${common[@]}" --ckpt-dir "$WORK/local" >"$WORK/local.txt" 2>&1 \
  || { tail "$WORK/local.txt"; fail "launch/local.sh train"; }
[ "$(json_field "$WORK/local.txt" world_size)" = 2 ] || fail "local.sh run has world_size $(json_field "$WORK/local.txt" world_size)"
[ "$(json_field "$WORK/local.txt" steps)" = 16 ] || fail "local.sh run took $(json_field "$WORK/local.txt" steps) steps, expected 16"
run_np 2 "${common[@]}" --ckpt-dir "$WORK/plain" >"$WORK/plain.txt" 2>&1 || { tail "$WORK/plain.txt"; fail "mpirun train"; }
run_np 1 ckpt merge "$WORK/local" --out "$WORK/local.h5" >/dev/null
run_np 1 ckpt merge "$WORK/plain" --out "$WORK/plain.h5" >/dev/null
/usr/bin/python3 "$(dirname "$0")/compare_ckpt.py" "$WORK/local.h5" "$WORK/plain.h5" --exact || fail "local.sh run differs from plain mpirun"
ok "launch/local.sh -n 2 train: 16 steps, world_size 2, parameters == plain mpirun's bitwise ($((SECONDS - t0)) s for both)"

printf 'localhost slots=2\n' >"$WORK/hosts"
timeout 120 "$SRC/launch/multinode.sh" --hostfile "$WORK/hosts" --oversubscribe -- doctor >"$WORK/doctor.txt" 2>&1 \
  || { cat "$WORK/doctor.txt"; fail "multinode.sh doctor"; }
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 != "" {print $1 "/" $2}' "$WORK/doctor.txt" | sort | tr '\n' ' ')
[ "$rows" = "0/0 1/1 " ] || { cat "$WORK/doctor.txt"; fail "multinode.sh doctor rows '$rows', expected '0/0 1/1'"; }
grep -q '^doctor: OK' "$WORK/doctor.txt" || fail "doctor self-test under multinode.sh"
ok "launch/multinode.sh --hostfile (localhost slots=2): -n 2 from the slots, ranks/local ranks 0/0 1/1, self-test OK"

set +e
"$SRC/launch/multinode.sh" -n 2 -- doctor >/dev/null 2>"$WORK/e1.txt"; rc1=$?
"$SRC/launch/multinode.sh" --hostfile "$WORK/missing" -- doctor >/dev/null 2>"$WORK/e2.txt"; rc2=$?
set -e
[ $rc1 = 2 ] && grep -q -- "--hostfile FILE is required" "$WORK/e1.txt" || fail "no-hostfile error: rc $rc1, $(cat "$WORK/e1.txt")"
[ $rc2 = 2 ] && grep -q "cannot read hostfile $WORK/missing" "$WORK/e2.txt" || fail "missing-hostfile error: rc $rc2, $(cat "$WORK/e2.txt")"
ok "multinode.sh: missing --hostfile and unreadable hostfile exit 2 naming the cause"
