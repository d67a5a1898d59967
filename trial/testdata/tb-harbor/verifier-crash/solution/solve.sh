#!/bin/bash
cat > /app/build.sh <<'SH'
#!/bin/sh
mkdir -p /app/build && echo built > /app/build/out
SH
chmod +x /app/build.sh
