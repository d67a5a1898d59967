package sandbox

import "testing"

// The no-network hint of a failed RUN is for commands that install or
// fetch, as a shell parser reads them.
func TestInstallsHint(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		"apt-get update && apt-get install -y vim":                                      true,
		"DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc": true,
		"sudo -E pip install numpy":                                                     true,
		"python3 -m pip install -r requirements.txt":                                    true,
		"curl -LsSf https://astral.sh/uv/install.sh | sh":                               true,
		"if ! command -v git; then\n  apt-get install -y git\nfi":                       true,
		"cd /src && uv sync --frozen":                                                   true,
		"timeout 60 wget -q https://example.com/x":                                      true,
		`python3 -c "import sys; sys.exit(3)"`:                                          false,
		"echo 'apt-get install vim' > /app/notes.txt":                                   false,
		"mkdir -p /app/out && gcc -o /app/out/x /app/x.c":                               false,
		"pip list && apt-cache policy vim":                                              false,
		"git init && git add -A":                                                        false,
		"echo 'unterminated":                                                            false,
	} {
		if got := installs(raw, nil); got != want {
			t.Errorf("%q: installs %v, want %v", raw, got, want)
		}
	}
	if !installs("", []string{"/usr/bin/apt-get", "install", "-y", "vim"}) || installs("", []string{"python3", "-c", "exit(3)"}) {
		t.Error("exec form")
	}
}
