package harbor

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParseConfig: no input panics; what parses re-emits (after an edit)
// to a document that parses to the same fields.
func FuzzParseConfig(f *testing.F) {
	for _, name := range samples {
		data, err := os.ReadFile(filepath.Join("testdata", "tasks", name, ConfigFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("version = \"1.0\"\n[environment]\nmemory = \"1.5G\"\ncpus = 0.5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		c, err := ParseConfig(data)
		if err != nil {
			if _, ok := err.(*FieldError); !ok {
				t.Fatalf("error %T %v is not a *FieldError", err, err)
			}
			return
		}
		out, err := c.Marshal()
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("unedited config not returned verbatim: %v", err)
		}
		c.Metadata.Category += "x"
		out, err = c.Marshal()
		if err != nil {
			t.Fatalf("marshal after edit: %v", err)
		}
		back, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("re-emitted config does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back.typed(), c.typed()) {
			t.Fatalf("fields changed over a round trip:\n%+v\n%+v\n%s", back.typed(), c.typed(), out)
		}
	})
}

// FuzzReadBundle: no archive panics or escapes; what is accepted bundles
// again to the same content.
func FuzzReadBundle(f *testing.F) {
	for _, name := range samples {
		task, err := Load(filepath.Join("testdata", "tasks", name))
		if err != nil {
			f.Fatal(err)
		}
		b, _, err := task.BundleBytes()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	lim := Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 4 << 20, MaxEntries: 200}
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := ReadBundle(bytes.NewReader(data), "fuzz", lim)
		if err != nil {
			return
		}
		h1, err := task.Hash()
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := task.BundleBytes()
		if err != nil {
			t.Fatalf("accepted task does not bundle: %v", err)
		}
		back, err := ReadBundle(bytes.NewReader(b), "again", lim)
		if err != nil {
			t.Fatalf("own bundle refused: %v", err)
		}
		if h2, _ := back.Hash(); h2 != h1 {
			t.Fatal("content changed over a bundle round trip")
		}
	})
}
