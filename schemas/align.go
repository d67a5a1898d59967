package schemas

import "fmt"

type chunkID struct {
	task           string
	attempt, chunk int32
}

// CheckAligned verifies that a tokens object and a routing object describe
// the same chunks with the same token counts: every chunk has one token
// row and one routing row, and routing covers each of its tokens. Errors
// name both objects and the chunk.
func CheckAligned(tokensKey string, tokens []TokenRow, routingKey string, routing []RoutingRow) error {
	counts := make(map[chunkID]int, len(tokens))
	for _, t := range tokens {
		id := chunkID{t.TaskID, t.Attempt, t.Chunk}
		if _, dup := counts[id]; dup {
			return fmt.Errorf("%s: chunk %s/%d/%d appears twice", tokensKey, id.task, id.attempt, id.chunk)
		}
		counts[id] = len(t.TokenIDs)
	}
	seen := make(map[chunkID]bool, len(routing))
	for _, r := range routing {
		id := chunkID{r.TaskID, r.Attempt, r.Chunk}
		n, ok := counts[id]
		if !ok {
			return fmt.Errorf("%s has routing for task %s attempt %d chunk %d, which %s lacks",
				routingKey, id.task, id.attempt, id.chunk, tokensKey)
		}
		if seen[id] {
			return fmt.Errorf("%s: chunk %s/%d/%d appears twice", routingKey, id.task, id.attempt, id.chunk)
		}
		seen[id] = true
		if int(r.Tokens) != n {
			return fmt.Errorf("task %s attempt %d chunk %d: %s holds %d tokens but %s routes %d",
				id.task, id.attempt, id.chunk, tokensKey, n, routingKey, r.Tokens)
		}
	}
	for id := range counts {
		if !seen[id] {
			return fmt.Errorf("task %s attempt %d chunk %d: %s has tokens but %s has no routing",
				id.task, id.attempt, id.chunk, tokensKey, routingKey)
		}
	}
	return nil
}
