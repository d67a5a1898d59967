#!/bin/bash
echo 1.4.2 > /app/VERSION
cat > /app/server.py <<'PY'
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/ping":
            body = b"pong"
        elif self.path == "/version":
            with open("/app/VERSION", "rb") as f:
                body = f.read().strip()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
PY
nohup python3 /app/server.py > /tmp/server.log 2>&1 &
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done
