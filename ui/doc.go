// Package ui serves `t1 ui`: a read-only web viewer of a run for the
// researchers who debug it. Its pages are the runs of the log (status,
// lineage), one run's overview (the base → SFT → RL table and the
// training curves of report), its attempts (a table sorted, filtered with
// `t1 query --where` expressions and paged by query.ReadAttempts), one
// attempt (the conversation turn by turn with the verifier's assertions
// and compaction boundaries, and its tokens coloured by the sampler's
// log-prob, the advantage or the sampler-vs-trainer gap, chunk starts
// that needed a TITO repair marked), the routing of one attempt (the
// experts each token went to at each layer, the load per layer, and per
// layer how often a replay-off update would route otherwise) and one
// task's attempts under two policy versions side by side.
//
// The gap and the replay-off routing are the trainer's view, which no
// table stores: a Rescorer (execute's loads the policy version that
// sampled the attempt from the run's lineage and runs its forward pass)
// computes them when a page shows them; without one the pages leave them
// out.
//
// Every table is read through package query, never by a reader of its
// own, and a page reads only what it shows: an attempt's rows come from
// its iteration's partition, the attempts table one page at a time, the
// token view TokensPerPage tokens at a time, so a page costs the same for
// a run of 100,000 attempts and a 64k-token trajectory
// (BenchmarkAttemptPage). A table object that does not read is named on
// the page with its error, and the rest of the page shows what the other
// objects hold. A page of a run still in progress listens to the run's
// event count (server-sent events, polled from the log) and reloads its
// content when it grows.
//
// Pages are rendered on the server with html/template, which escapes
// what the agent wrote (commands, observations and token text are the
// adversary's); the Content-Security-Policy allows scripts, styles and
// images from the server only, so nothing on a page loads or sends
// anything elsewhere. The assets are embedded in the binary: the page
// script and style of this package and uPlot (the curves), a built file
// copied from the npm package pinned in testdata/package-lock.json, its
// license beside it (TestEmbeddedUPlotIsNPMs checks the copy).
package ui
