# Sourced by the training scripts (not run on its own).
# two_lanes FN1 LOG1 FN2 LOG2: run two shell functions side by side, each writing to its log;
# wait for both, print the last 30 lines of each failed lane's log, and return the status of the
# last lane that failed (0 when both succeeded).
two_lanes() {
  "$1" > "$2" 2>&1 & local one=$!
  "$3" > "$4" 2>&1 & local two=$!
  local status=0
  wait "$one" || { status=$?; tail -n 30 "$2" >&2; }
  wait "$two" || { status=$?; tail -n 30 "$4" >&2; }
  return "$status"
}
