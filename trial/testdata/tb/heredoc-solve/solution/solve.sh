#!/bin/bash
set -euo pipefail

mkdir -p /app/bin

# install_script DEST writes the tool; the quoted delimiter keeps its $.
install_script() {
  local dest="$1"
  cat << 'EOF' > "$dest"
#!/bin/bash
# tally DIR: word counts of DIR's .txt files
dir="${1:?usage: tally DIR}"
for f in "$dir"/*.txt; do
  n=$(wc -w < "$f")
  echo "$(basename "$f"): $((n + 0))"
done
EOF
  chmod +x "$dest"
}

install_script /app/bin/tally

if [ -x /app/bin/tally ]; then
  /app/bin/tally /app/notes > /app/tally.txt
else
  echo "tally is missing" >&2
  exit 1
fi

# The first line, read through a here-string.
read -r first <<< "$(head -n 1 /app/tally.txt)"
case "$first" in
  a.txt:*) echo "first line: $first" ;;
  *) echo "unexpected first line: $first" >&2; exit 1 ;;
esac
