package local

import (
	"context"
	"fmt"
	"io"

	"github.com/t1pipe/t1/engine"
)

// ServeHelp is what `t1 infra up` says of itself.
const ServeHelp = "Runs the embedded servers on the data directory and prints their endpoints, which are also\n" +
	"written to <data>/endpoints.json for other t1 processes and the nats CLI."

// WriteEndpoints prints where the servers listen, as `t1 infra up` does.
func (in *Infra) WriteEndpoints(out io.Writer) {
	fmt.Fprintf(out, "nats:   %s\n", in.Endpoints.NATS)
	fmt.Fprintf(out, "s3:     http://%s  bucket %s  credentials %s\n", in.Endpoints.S3, in.Endpoints.Bucket, in.Endpoints.Credentials)
	fmt.Fprintf(out, "data:   %s  (endpoints in %s)\n", in.DataDir, EndpointsPath(in.DataDir))
	fmt.Fprintln(out, "serving; Ctrl-C stops")
}

// Status is what `t1 status` shows: the log's status under the URL of
// the NATS server that holds it.
type Status struct {
	NATS string `json:"nats"`
	engine.Status
}

// Status reads the log's status.
func (in *Infra) Status(ctx context.Context) (Status, error) {
	st, err := in.Log.Status(ctx)
	return Status{in.Endpoints.NATS, st}, err
}

// WriteText prints the status as tables.
func (s Status) WriteText(w io.Writer) { s.Status.WriteText(w, s.NATS) }
