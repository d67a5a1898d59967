"""Writes seeded CSV files and the answers for them: gen_data.py DIR SEED."""

import json
import random
import sys
from pathlib import Path

out, seed = Path(sys.argv[1]), int(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
rng = random.Random(seed)
answers = {}
for i in range(3):
    values = [rng.randint(-50, 200) for _ in range(rng.randint(5, 40))]
    name = f"data{i}.csv"
    (out / name).write_text("id,value\n" + "".join(f"{j},{v}\n" for j, v in enumerate(values)))
    answers[name] = f"count={len(values)} mean={sum(values) / len(values):.2f} max={max(values)}"
(out / "answers.json").write_text(json.dumps(answers))
