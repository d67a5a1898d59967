package image

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/t1pipe/t1/infra/egress"
)

// Base is the Debian root filesystem every supported FROM maps to.
type Base struct {
	Mirror  string // the archive's URI
	Suite   string // bookworm
	Variant string // debootstrap's variant: minbase
}

// DefaultSuite is the suite of the base when the host's apt names none.
const DefaultSuite = "bookworm"

// HostBase reads the Debian mirror the host's apt is configured for from
// /etc/apt/sources.list.d/*.sources (deb822) and /etc/apt/sources.list:
// the first "deb" entry that is not a security or updates suite.
func HostBase(etc string) (Base, error) {
	if etc == "" {
		etc = "/etc/apt"
	}
	found := hostSources(etc)
	for _, b := range found {
		if !strings.Contains(b.Suite, "-") && !strings.Contains(b.Mirror, "security") {
			b.Variant = "minbase"
			return b, nil
		}
	}
	return Base{}, fmt.Errorf("image: no Debian mirror in %s/sources.list or %s/sources.list.d: the base image is made with debootstrap from the mirror the host's apt uses; configure one (deb http://deb.debian.org/debian %s main)", etc, etc, DefaultSuite)
}

// HostMirrors are the hosts (host, or host:port where the URI names a
// port) of every Debian archive the host's apt is configured for,
// security and updates included, in the order found.
func HostMirrors(etc string) ([]string, error) {
	if etc == "" {
		etc = "/etc/apt"
	}
	var out []string
	seen := map[string]bool{}
	for _, b := range hostSources(etc) {
		u, err := url.Parse(b.Mirror)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			continue
		}
		if h := strings.ToLower(u.Host); !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image: no http or https Debian mirror in %s/sources.list or %s/sources.list.d: the registries proxy allows the mirrors the host's apt uses; configure one, or list the hosts in sandbox.registries", etc, etc)
	}
	return out, nil
}

// DefaultRegistries is the registries proxy's allow-list when none is
// configured: the host's Debian mirrors (HostMirrors) and
// egress.DefaultHosts (PyPI, npm).
func DefaultRegistries(etc string) ([]string, error) {
	m, err := HostMirrors(etc)
	if err != nil {
		return nil, err
	}
	return append(m, egress.DefaultHosts...), nil
}

// hostSources lists every deb entry of the apt configuration in etc.
func hostSources(etc string) []Base {
	var found []Base
	files, _ := filepath.Glob(filepath.Join(etc, "sources.list.d", "*.sources"))
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			found = append(found, deb822(data)...)
		}
	}
	lists, _ := filepath.Glob(filepath.Join(etc, "sources.list.d", "*.list"))
	for _, f := range append([]string{filepath.Join(etc, "sources.list")}, lists...) {
		if data, err := os.ReadFile(f); err == nil {
			found = append(found, oneLine(data)...)
		}
	}
	return found
}

func deb822(data []byte) []Base {
	var out []Base
	for _, stanza := range regexp.MustCompile(`\n\s*\n`).Split(string(data), -1) {
		f := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if ok && !strings.HasPrefix(line, " ") {
				f[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !strings.Contains(" "+f["types"]+" ", " deb ") || f["enabled"] == "no" {
			continue
		}
		uris, suites := strings.Fields(f["uris"]), strings.Fields(f["suites"])
		for _, u := range uris {
			for _, s := range suites {
				out = append(out, Base{Mirror: u, Suite: s})
			}
		}
	}
	return out
}

func oneLine(data []byte) []Base {
	var out []Base
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) < 3 || w[0] != "deb" {
			continue
		}
		w = w[1:]
		if strings.HasPrefix(w[0], "[") {
			for len(w) > 0 && !strings.HasSuffix(w[0], "]") {
				w = w[1:]
			}
			if len(w) > 0 {
				w = w[1:]
			}
		}
		if len(w) >= 2 {
			out = append(out, Base{Mirror: w[0], Suite: w[1]})
		}
	}
	return out
}

// mapping is what a FROM image becomes: the base, and for python images
// the steps that give it python3 as python.
type mapping struct {
	note  string
	extra []string // RUN steps after the base
}

// pythonSteps make a Debian base look like the python images: python3
// with pip, python → python3, and pip free to install system-wide as it
// is there (no EXTERNALLY-MANAGED marker).
var pythonSteps = []string{
	"apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pip python3-venv python-is-python3 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED && rm -rf /var/lib/apt/lists/*",
}

var fromRE = regexp.MustCompile(`^(?:docker\.io/)?(?:library/)?(ubuntu|debian|python)(?::([^@]+))?(?:@sha256:[0-9a-f]+)?$`)

// mapFrom maps a FROM image onto the base, or says why it cannot.
func mapFrom(image string, b Base) (mapping, error) {
	m := fromRE.FindStringSubmatch(strings.ToLower(image))
	if m == nil {
		return mapping{}, fmt.Errorf("unknown base image %q: only ubuntu:*, debian:* and python:* map onto the Debian base (debian %s %s from %s)", image, b.Suite, b.Variant, b.Mirror)
	}
	base := fmt.Sprintf("debian %s (debootstrap %s from %s)", b.Suite, b.Variant, b.Mirror)
	switch m[1] {
	case "python":
		return mapping{note: fmt.Sprintf("FROM %s → %s with Debian's python3 as python (the tag's Python version is not matched)", image, base), extra: pythonSteps}, nil
	case "ubuntu":
		return mapping{note: fmt.Sprintf("FROM %s → %s (Ubuntu package names that Debian lacks fail at their RUN)", image, base)}, nil
	}
	return mapping{note: fmt.Sprintf("FROM %s → %s", image, base)}, nil
}
