#!/bin/bash
# plimsolld --check_config on policy names: a deprecated name is valid and warned about on
# stderr, the effective configuration names the policy that runs; an unknown name is refused
# (exit 2) with the field and the policies there are. $1: the plimsolld binary.
set -uo pipefail
plimsolld="${TEST_SRCDIR}/${TEST_WORKSPACE}/$1"
tmp="${TEST_TMPDIR:-/tmp}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$plimsolld" --check_config --policy=pagecache_law >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "pagecache_law: exit $rc, want 0"
grep -qxF 'plimsolld: warning: config field "policy": "pagecache_law" is a deprecated name of "pagecache" (the same policy), which runs; write policy: "pagecache"' "$tmp/err" ||
  fail "pagecache_law: no deprecation warning on stderr: $(cat "$tmp/err")"
grep -qxF 'policy: "pagecache"' "$tmp/out" || fail "pagecache_law: the effective config does not say pagecache: $(cat "$tmp/out")"

"$plimsolld" --check_config --policy=pagecache >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "pagecache: exit $rc, want 0"
[ ! -s "$tmp/err" ] || fail "pagecache: stderr not empty: $(cat "$tmp/err")"

"$plimsolld" --check_config >"$tmp/out" 2>"$tmp/err"
grep -qxF 'policy: "pagecache"' "$tmp/out" || fail "the default is not pagecache: $(cat "$tmp/out")"

"$plimsolld" --check_config --policy=rule_heap >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "rule_heap: exit $rc, want 2"
grep -qxF 'plimsolld: config field "policy": unknown policy "rule_heap"; known policies: mom, static, pagecache, proxmox' "$tmp/err" ||
  fail "rule_heap: want the field and the policies there are: $(cat "$tmp/err")"

[ "$failures" -eq 0 ] && echo "PASS"
exit "$failures"
