package local

import (
	"bytes"
	"testing"
)

func TestWriteEndpoints(t *testing.T) {
	in := &Infra{DataDir: "/d", Endpoints: Endpoints{NATS: "nats://127.0.0.1:4222", S3: "127.0.0.1:9000", Bucket: "t1", Credentials: "/d/creds"}}
	var b bytes.Buffer
	in.WriteEndpoints(&b)
	want := "nats:   nats://127.0.0.1:4222\ns3:     http://127.0.0.1:9000  bucket t1  credentials /d/creds\ndata:   /d  (endpoints in /d/endpoints.json)\nserving; Ctrl-C stops\n"
	if b.String() != want {
		t.Fatalf("got %q\nwant %q", b.String(), want)
	}
}

func TestStatusWriteText(t *testing.T) {
	var b bytes.Buffer
	Status{NATS: "nats://x"}.WriteText(&b)
	if !bytes.HasPrefix(b.Bytes(), []byte("NATS nats://x\n\nSTREAM")) {
		t.Fatalf("%q", b.String())
	}
}
