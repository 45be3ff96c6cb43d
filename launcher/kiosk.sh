#!/usr/bin/env bash
# The screen on the box: wait until the app answers, then show /kiosk full-screen in Debian's Chromium.
#   launcher/kiosk.sh [http://127.0.0.1:7860]
set -euo pipefail
URL=${1:-${QUARTET_URL:-http://127.0.0.1:7860}}
until curl -fsS --max-time 2 "$URL/health" >/dev/null 2>&1; do
    sleep 1
done
exec /usr/bin/chromium --kiosk --noerrdialogs --disable-infobars --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-session-crashed-bubble --overscroll-history-navigation=0 \
    --user-data-dir="${XDG_RUNTIME_DIR:-/tmp}/quartet-kiosk" "$URL/kiosk/"
