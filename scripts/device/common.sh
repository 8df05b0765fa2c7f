# Shared preamble of the device scripts (source it): `device_run NAME SECONDS` sets OUT (default
# out/NAME), the scratch folder W=/tmp/cgb-NAME (emptied), the deadline SECONDS from now, and defines
# left N (N or the seconds left before the deadline, at least 5), say MSG (timestamped, into
# $W/steps.log) and PT (the pytest command line).
device_run() {
  set -u
  export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
  OUT="${OUT:-out/$1}"; W="/tmp/cgb-$1"; rm -rf "$W"; mkdir -p "$W" "$OUT"
  start=$(date +%s); deadline=$((start + $2))
  PT="python3 -m pytest -p no:cacheprovider -q -rs"
}
left() { local l=$((deadline - $(date +%s))); [ "$l" -gt "$1" ] && echo "$1" || echo "$((l > 5 ? l : 5))"; }
say() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a "$W/steps.log"; }
