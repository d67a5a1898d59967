package local

import (
	"fmt"
	"io"
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
