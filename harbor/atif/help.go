package atif

// ExportHelp is what `t1 export atif` says of itself.
const ExportHelp = `Follows the run's rollout.completed and reward.scored events to each attempt's
trajectory, turns and tokens objects and its verdict, and writes them in Harbor's
job and trial layout, which ` + "`harbor view DIR`" + ` opens: one job per purpose, suite and
policy version, DIR/<run>-<purpose>[-<suite>]-v<policy>/ with config.json and
result.json (trials, errors, mean reward), and in it one trial per attempt,
<task>__a<attempt>-i<iteration>/ with config.json, result.json (verifier_result.rewards:
reward, resolved, passed, total), agent/trajectory.json (ATIF) and verifier/reward.txt.
An attempt without a reward is a trial with exception_info and no verifier result.
Agent steps carry the commands as bash tool calls (read from each reply with the
configured stages.rollout.model.action_format), the observation, and the turn's
prompt length, completion token ids and sampler log-probs.`
