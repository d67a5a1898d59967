package chattemplate

import (
	"fmt"
	"strings"
	"time"
)

// strftime formats t as Python's datetime.strftime does in the C locale for
// the naive local time transformers passes (so %z and %Z are empty). The
// glibc "-" flag drops the padding (%-d). A directive outside this set is
// refused: Python would hand it to the platform's C library, whose answer
// differs between systems.
func strftime(t time.Time, format string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			b.WriteByte(format[i])
			continue
		}
		i++
		pad := true
		if i < len(format) && format[i] == '-' {
			pad = false
			i++
		}
		if i >= len(format) {
			return "", fmt.Errorf("strftime_now(%q): the format ends inside a directive", format)
		}
		num := func(n, width int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", width, n)
			} else {
				fmt.Fprintf(&b, "%d", n)
			}
		}
		switch format[i] {
		case 'Y':
			num(t.Year(), 4)
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num((t.Hour()+11)%12+1, 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'f':
			num(t.Nanosecond()/1000, 6)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'z', 'Z':
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("strftime_now(%q): the directive %%%c is not supported", format, format[i])
		}
	}
	return b.String(), nil
}
