#!/bin/bash
set -euo pipefail
mkdir -p /opt/wordfreq
printf '%s\n' a an the > /opt/wordfreq/stopwords
cat > /tmp/wordfreq <<'SH'
#!/bin/sh
tr -cs 'A-Za-z' '\n' | tr 'A-Z' 'a-z' | grep -v '^$' | grep -vxFf /opt/wordfreq/stopwords |
	sort | uniq -c | sort -k1,1nr -k2,2 | sed 's/^ *//'
SH
install -m 755 /tmp/wordfreq /usr/local/bin/wordfreq
