package routing

import "strings"

func stringsContains(a, b string) bool { return strings.Contains(a, b) }
