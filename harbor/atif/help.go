package atif

// ExportHelp is what `t1 export atif` says of itself.
const ExportHelp = `Follows the run's rollout.completed events to their trajectory, turns and tokens
objects and writes one ATIF file per attempt: DIR/<task>-a<attempt>-i<iteration>-v<policy>-<purpose>.json.
Agent steps carry the commands as bash tool calls (read from each reply with the
configured stages.rollout.model.action_format), the observation, and the turn's
prompt length, completion token ids and sampler log-probs.`
