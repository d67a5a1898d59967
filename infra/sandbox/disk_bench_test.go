package sandbox

import (
	"fmt"
	"testing"
)

// BenchmarkDiskUsage: one measurement of a sandbox holding 5000 small
// files, by the tmpfs's counters (root callers) and by the walk of the
// measured fallback.
func BenchmarkDiskUsage(b *testing.B) {
	for _, measured := range []bool{false, true} {
		name := map[bool]string{false: DiskTmpfs, true: DiskMeasured}[measured]
		b.Run(name, func(b *testing.B) {
			measureOnly = measured
			defer func() { measureOnly = false }()
			box, err := newBox(&plainLauncher{}, Spec{}, -1, -1)
			if err != nil {
				b.Fatal(err)
			}
			defer box.removeAll()
			if box.disk.mode != name {
				b.Skipf("disk mode %s here", box.disk.mode)
			}
			for i := range 5000 {
				if err := box.fsRoot.WriteFile(fmt.Sprintf("app/f%d", i), []byte("x"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				box.usage()
			}
		})
	}
}

// BenchmarkNewBox: creating and removing a sandbox's directories, with
// and without mounting its tmpfs.
func BenchmarkNewBox(b *testing.B) {
	for _, measured := range []bool{false, true} {
		b.Run(map[bool]string{false: DiskTmpfs, true: DiskMeasured}[measured], func(b *testing.B) {
			measureOnly = measured
			defer func() { measureOnly = false }()
			for b.Loop() {
				box, err := newBox(&plainLauncher{}, Spec{}, -1, -1)
				if err != nil {
					b.Fatal(err)
				}
				box.removeAll()
			}
		})
	}
}
