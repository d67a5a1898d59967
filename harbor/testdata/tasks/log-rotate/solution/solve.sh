#!/bin/bash
set -euo pipefail
cat > /app/rotate.sh <<'SH'
#!/bin/bash
set -euo pipefail
log="${LOG_DIR:-/app/logs}/app.log"
arch=/app/archive
keep=$(sed -n 's/^keep *= *\([0-9][0-9]*\).*/\1/p' /app/rotate.conf)
[ -s "$log" ] || exit 0
for n in $(ls "$arch" 2>/dev/null | sed -n 's/^app\.log\.\([0-9][0-9]*\)$/\1/p' | sort -rn); do
  mv "$arch/app.log.$n" "$arch/app.log.$((n + 1))"
done
mode=$(stat -c %a "$log")
mv "$log" "$arch/app.log.1"
install -m "$mode" /dev/null "$log"
for f in "$arch"/app.log.*; do
  n=${f##*.}
  [ "$n" -gt "$keep" ] && rm -f "$f"
done
exit 0
SH
chmod +x /app/rotate.sh
