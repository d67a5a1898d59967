package trainer

import "github.com/t1pipe/t1/schemas"

// TrainingReport is the trainer's full account of one actor update,
// stored (as JSON) at keys.TrainingReport once the new policy and its
// metrics row are stored; it marks the update as done.
type TrainingReport struct {
	Metrics ActorMetrics `json:"metrics"`
	// Event is the policy.updated payload the update announced.
	Event schemas.PolicyUpdatedPayload `json:"event"`
}
