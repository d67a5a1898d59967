#!/bin/bash
cat > /app/stats.sh <<'EOF'
#!/bin/bash
awk -F, 'NR > 1 { n++; s += $2; if (n == 1 || $2 > m) m = $2 }
  END { printf "count=%d mean=%.2f max=%d\n", n, (n ? s / n : 0), m }' "$1"
EOF
chmod +x /app/stats.sh
