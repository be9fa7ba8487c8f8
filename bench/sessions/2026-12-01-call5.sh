#!/usr/bin/env bash
# Issue 12, device call 5 (final): call 4's script again, on the final build.
exec "$(dirname "$0")/2026-12-01-call4.sh" "$@"
