#!/usr/bin/env bash
# Cost of straggler detection (#20): step time with detection on (default threshold 0.05) over
# off (--straggler-threshold 0); see perf/flag_cost.sh for the method.
#   perf/straggler_cost.sh [PAIRS (default 5)] [DATA DIR (default: a synthetic 28x28 set)]
exec "$(dirname "$0")/flag_cost.sh" straggler "--straggler-threshold 0.05" "--straggler-threshold 0" "$@"
