package ui

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/t1pipe/t1/schemas"
)

// BenchmarkAttemptPage is the server's work to open one attempt of a
// 64k-token trajectory (16 chunks of 4096 tokens, 128 turns): reading
// its rows of the trajectories, turns, rewards, tokens and values tables
// through query from the embedded S3 gateway, and rendering the page
// with its first TokensPerPage tokens.
func BenchmarkAttemptPage(b *testing.B) {
	f := newFixture(b, "bench")
	f.attempt(b, 0, "long", 1, 64<<10, 4096)
	// Another attempt in the same partition, which the page must skip.
	f.attempt(b, 0, "other", 1, 8<<10, 4096)
	path := f.attemptPath(0, "long", 1)
	for b.Loop() {
		if code, body := f.get(b, path); code != http.StatusOK || len(body) < 100<<10 {
			b.Fatalf("%d, %d bytes", code, len(body))
		}
	}
}

// BenchmarkAttemptsPage is one page of the attempts table of a run of
// 100,000 attempts (ten objects of trajectories and of rewards), sorted
// by reward and filtered.
func BenchmarkAttemptsPage(b *testing.B) {
	f := newFixture(b, "bench")
	const objects, per = 10, 10000
	for o := range objects {
		trajs := make([]schemas.TrajectoryRow, per)
		rewards := make([]schemas.RewardRow, per)
		for i := range per {
			task := fmt.Sprintf("task-%05d", i)
			trajs[i] = schemas.TrajectoryRow{Run: f.run, TaskID: task, Attempt: int32(o), Iteration: int32(o), Purpose: "train",
				PolicyVersion: int64(o + 1), Turns: int32(i % 30), Tokens: int64(i), Termination: "task_complete", DurationMS: int64(i)}
			rewards[i] = schemas.RewardRow{Run: f.run, TaskID: task, Attempt: int32(o), Iteration: int32(o), Purpose: "train",
				PolicyVersion: int64(o + 1), Passed: int32(i % 5), Total: 4, Reward: float64(i%5) / 4, Source: "ctrf"}
		}
		write(b, f, o, trajs)
		write(b, f, o, rewards)
	}
	path := "/runs/bench/attempts?sort=reward&desc=1&page=300&where=turns%20%3E%3D%205"
	for b.Loop() {
		if code, body := f.get(b, path); code != http.StatusOK || len(body) < 10<<10 {
			b.Fatalf("%d, %d bytes", code, len(body))
		}
	}
}
