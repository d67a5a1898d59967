// Package bus connects t1 to NATS: either a nats-server embedded in the
// process, with JetStream file storage under the data directory, or an
// external NATS cluster reached with the usual credentials (user/password,
// nkey seed, creds file) and TLS.
//
// The package owns connections only. Streams, consumers and the event
// envelope live in package engine, so the same engine code runs against the
// embedded server in tests and laptops and against a production cluster.
package bus
