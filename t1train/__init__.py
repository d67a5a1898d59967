"""t1train: t1's external PyTorch trainer for Qwen3-MoE (the exec protocol of package trainer).

t1 runs it once per job:

    python -m t1train --job JOB.json --out RESULT.json          (or under torchrun)

It reads the job file (actor, critic or sft), reads the batch's Parquet objects from the object
store (store.py), trains a transformers Qwen3-MoE with rollout routing replay (model.py) using the
arithmetic of t1's Go reference trainer (rl.py, optim.py; actor.py, critic.py, sft.py), saves a
Hugging Face checkpoint to a local directory and writes the result file t1 decodes strictly
(result.py). See README.md.
"""
