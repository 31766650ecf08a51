#!/usr/bin/env bash
# Cost of the flight recorder (#33): step time with --flight-records 2048 (the default) over
# --flight-records 0; see perf/flag_cost.sh for the method.
#   perf/flight_cost.sh [PAIRS (default 5)] [DATA DIR (default: a synthetic 28x28 set)]
exec "$(dirname "$0")/flag_cost.sh" flight "--flight-records 2048" "--flight-records 0" "$@"
