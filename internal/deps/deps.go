// Package deps pins direct dependencies while the packages that use them are written.
package deps

import (
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/cenkalti/backoff/v4"
	_ "github.com/goccy/go-yaml"
	_ "github.com/minio/minio-go/v7"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/spf13/cobra"
	_ "github.com/versity/versitygw/backend/meta"
	_ "github.com/versity/versitygw/backend/posix"
	_ "github.com/versity/versitygw/embedgw"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	_ "go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	_ "go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.opentelemetry.io/otel/propagation"
)
