# Shared helpers for e2e tests (sourced). Each test: set -euo pipefail, a temp dir cleaned on
# exit, `run_np N ARGS...` to start the real CLI under mpirun, and `fail MSG` to stop.
set -euo pipefail
BIN=${HPCTRAIN_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/hpctrain}
MPIEXEC=${MPIEXEC:-mpiexec}
MPIFLAGS=()
if [ "$(id -u)" = 0 ]; then MPIFLAGS+=(--allow-run-as-root); fi
MPIFLAGS+=(--oversubscribe -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -x MKL_NUM_THREADS=1)
export OMP_NUM_THREADS=1
WORK=$(mktemp -d /tmp/hpctrain-e2e.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
run_np() { local n=$1; shift; timeout 600 "$MPIEXEC" -np "$n" "${MPIFLAGS[@]}" "$BIN" "$@"; }
# The last stdout line of a run, parsed as JSON, field $2 of file $1 (python3 -c).
json_field() { /usr/bin/python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])[sys.argv[2]])" "$1" "$2"; }
