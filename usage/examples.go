package usage

// Examples are each command's examples, by its path under t1, as its
// help prints them; docs/commands.md has them in context.
var Examples = map[string]string{
	"": `t1 run                                  # the default run under ./.t1
t1 query rewards --run main --limit 5
t1 help query`,
	"version": `t1 version --json`,
	"config":  `t1 config defaults > pipeline.yaml`,
	"config defaults": `t1 config defaults
t1 config defaults --json | jq .stages.control`,
	"infra":    `t1 infra up --data /scratch/t1`,
	"infra up": `t1 infra up --data /scratch/t1      # other t1 processes find it through /scratch/t1/endpoints.json`,
	"status": `t1 status
t1 status --json | jq '.consumers[] | select(.pending > 0)'`,
	"events": `t1 events list --run main --type policy.updated`,
	"events list": `t1 events list --run main --type policy.updated
t1 events list --run main --limit 20 --json`,
	"events tail": `t1 events tail --run main --type eval.completed`,
	"run": `t1 run
t1 run --config examples/torch-trainer.yaml --json
t1 run --no-stages & t1 worker --stage rollout`,
	"ablate": `t1 ablate --config examples/t1-table.yaml --seeds 1,2,3
t1 ablate --variants no-replay --rl-seeds 11,12`,
	"demo": `t1 demo --json`,
	"replay": `t1 replay --stage reward --run main --into main-rescored
t1 replay --stage ppo --run main --into main-lr --continue --iteration 1 --set training.lr=1e-5`,
	"runs": `t1 runs
t1 runs --json | jq -r '.[].run'`,
	"worker": `t1 worker --stage rollout --until-idle
t1 worker --stage control --run main`,
	"eval": `t1 eval --run main --policy v3 --suite builtin --attempts 4 --json`,
	"query": `t1 query rewards --run main --select task_id,attempt,passed,total,reward --limit 10
t1 query trajectories --run main --where "purpose = 'eval' AND turns >= 2" --format csv
t1 query tokens --run main --format ndjson | jq .task_id
t1 query routing --run main --format arrow > routing.arrows`,
	"ui": `t1 ui --run main
t1 ui --addr 127.0.0.1:0          # any free port; the URL is printed`,
	"report": `t1 report --run main
t1 report --run main --compare main-rescored --out /tmp/report`,
	"inspect": `t1 inspect runs/main/rewards/iter=0000/part-<sha256>.parquet
t1 inspect .t1/s3/t1-data/runs/main/tokens/iter=0001/part-<sha256>.parquet --json`,
	"tasks":          `t1 tasks validate harbor/testdata/tasks/*`,
	"tasks validate": `t1 tasks validate harbor/testdata/tasks/log-rotate`,
	"tasks check": `t1 tasks check harbor/testdata/tasks/log-rotate
t1 tasks check --backend process --allow-unisolated /data/tasks/*`,
	"tasks import": `t1 tasks import --run main /data/tasks/*`,
	"tasks export": `t1 tasks export --run main --out /tmp/tasks
t1 tasks export basic-0001 --out /tmp/tasks`,
	"serve-policy": `t1 serve-policy --checkpoint /tmp/start --precision f32 --addr 127.0.0.1:30000`,
	"moe":          `t1 moe gap --sft-steps 20`,
	"moe gap":      `t1 moe gap --checkpoint runs/main/policy/v000003 --json`,
	"moe init":     `t1 moe init --out /tmp/start`,
	"sandbox":      `t1 sandbox run -- uname -a`,
	"sandbox run": `t1 sandbox run --task harbor/testdata/tasks/log-rotate -- ls /app
t1 sandbox run --timeout 5s -- sleep 10; echo $?     # 124`,
	"sandbox shell": `t1 sandbox shell --task harbor/testdata/tasks/log-rotate`,
	"sandbox ls": `t1 sandbox ls                # every owner on this host, alive or dead, and what it holds
t1 sandbox ls --json`,
	"sandbox reap": `t1 sandbox reap              # remove what dead t1 processes left; live ones keep theirs`,
	"image":        `t1 image build harbor/testdata/tasks/log-rotate`,
	"image build":  `sudo t1 image build harbor/testdata/tasks/log-rotate --push -v`,
	"rollout": `t1 rollout --task harbor/testdata/tasks/log-rotate --policy oracle
t1 rollout --task harbor/testdata/tasks/log-rotate --rows rows.json --json`,
	"export":      `t1 export atif --run main --out atif/`,
	"export atif": `t1 export atif --run main --out atif/ --purpose eval`,
	"digest": `t1 digest --run main
diff <(t1 digest --run a --json) <(t1 digest --run b --json)`,
	"pool":      `t1 pool show --run main`,
	"pool show": `t1 pool show --run main --version 1 --json`,
	"chat":      `t1 chat render --tokenizer-config /models/Qwen3-30B-A3B --messages conversation.json`,
	"chat render": `t1 chat render --tokenizer-config /models/Qwen3-30B-A3B --messages conversation.json --add-generation-prompt
t1 chat render --tokenizer-config tokenizer_config.json --messages m.json --tools tools.json --enable-thinking=false`,
	"tokenizer": `echo 'ls -la /app' | t1 tokenizer encode`,
	"tokenizer encode": `t1 tokenizer encode 'ls -la /app'
t1 tokenizer encode --tokenizer /models/Qwen3-30B-A3B --json < prompt.txt`,
	"tokenizer decode": `t1 tokenizer decode 3 17 42
t1 tokenizer decode --tokenizer /models/Qwen3-30B-A3B 151644,872`,
	"tokenizer render": `t1 tokenizer render --tokenizer /models/Qwen3-30B-A3B --messages conversation.json`,
}
