package moe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// WeightsIndexFile lists the shards of a Hugging Face model's weights
// (model-00001-of-00016.safetensors, …), as large models are saved: its
// weight_map names, for every tensor, the shard that holds it.
const WeightsIndexFile = "model.safetensors.index.json"

// WeightShards reads a model.safetensors.index.json and returns the
// shard files its weight_map names, sorted, each once. Whatever reads a
// sharded checkpoint's weights (a digest, an adoption, an export) reads
// these and no other files, so an index that names none, or a name that
// is not a file beside the index (a path, "..", a name that is not a
// .safetensors file), is refused.
func WeightShards(index []byte) ([]string, error) {
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(index, &ix); err != nil {
		return nil, fmt.Errorf("%s: %w", WeightsIndexFile, err)
	}
	if len(ix.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map names no shard: want {\"weight_map\": {tensor: shard file, …}}", WeightsIndexFile)
	}
	var shards []string
	for tensor, f := range ix.WeightMap {
		if f == "" || strings.ContainsAny(f, `/\`) || strings.HasPrefix(f, ".") || !strings.HasSuffix(f, ".safetensors") || f == WeightsIndexFile {
			return nil, fmt.Errorf("%s: tensor %q is in shard %q: want the name of a .safetensors file beside the index", WeightsIndexFile, tensor, f)
		}
		shards = append(shards, f)
	}
	slices.Sort(shards)
	return slices.Compact(shards), nil
}
