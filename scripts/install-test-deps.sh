#!/usr/bin/env bash
# Installs, from Debian's packages, the programs some test files drive when they are present:
#
#   nginx     test/http-cache-nginx.test.ts  (nginx-light: a real HTTP cache in front of the API)
#   chromium  test/browser.test.ts           (headless Chromium, driven by playwright-core)
#   prometheus test/metrics.test.ts, test/dashboard.test.ts (promtool check metrics; dashboard
#             queries against a real Prometheus), test/alerts.test.ts (promtool check rules and
#             test rules over prometheus/alerts.yml)
#   curl      test/readme.test.ts            (runs the README's curl examples as written)
#
# Idempotent: what is installed already is left alone, and `apt-get update` runs only when
# something is missing. Without these programs the test files that need them skip themselves with a
# warning, so calling this is what makes them run (in CI: from .ci/run, before `npm test`).
# Needs root (or passwordless sudo) when it has something to install. Never downloads a browser
# through Playwright (`npx playwright install`): playwright-core uses /usr/bin/chromium.
#
#   scripts/install-test-deps.sh
set -euo pipefail

missing=()
# nginx lives in /usr/sbin, which is not on every user's PATH.
if ! command -v nginx >/dev/null 2>&1 && [[ ! -x /usr/sbin/nginx ]]; then
  missing+=(nginx-light)
fi
if [[ ! -x /usr/bin/chromium ]]; then
  missing+=(chromium)
fi
if ! command -v promtool >/dev/null 2>&1; then
  missing+=(prometheus)
fi
if ! command -v curl >/dev/null 2>&1; then
  missing+=(curl)
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "== test dependencies present: nginx, chromium, prometheus, curl"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "== no apt-get: cannot install ${missing[*]}; the tests that need them will be skipped" >&2
  exit 1
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    echo "== not root and no passwordless sudo: cannot install ${missing[*]}" >&2
    exit 1
  fi
fi

echo "== installing ${missing[*]} from the distribution's packages"
"${sudo[@]}" apt-get update -qq
# With recommends, as the tests were run. Containers often forbid starting services
# (policy-rc.d denies nginx's start): the tests run nginx themselves, in the foreground.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null

nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
"$nginx_bin" -v
/usr/bin/chromium --version
promtool --version | head -1
