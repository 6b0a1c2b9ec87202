"""How often PACE's recipe mines a prefix row's own final target as one of its negatives.

    python -m studies.pace_label_audit --config training/configs/pace_tiny.json \
        --checkpoint assets/methods/pace [--batches 20]

Draws the trainer's batches (its rng, its prefix cuts against intermediate targets), runs the
checkpoint's net on them and mines the whole training gallery as the loss does. For the rows cut
to a prefix it reports the share whose own final target (which satisfies every prefix of its
text) is among the mined negatives, and the share where q_n scores the final target above the
intermediate positive. Prints one JSON line. (It measured the premise of the refused
`spare_final` lever, docs/experiments/pace.md.)
"""
from __future__ import annotations

import argparse
import json
import random

import numpy as np
import torch
from safetensors.torch import load_file

from cir_core.methods.pace import final_state
from training.loop import parse_cli
from training.train_pace import DEFAULTS, PACETask, mine_hard_negatives


class AuditedTask(PACETask):
    """The trainer's task, recording the cache rows of each batch it draws (the same draws): a
    row's final target is the cache's target of that row, whatever the batch cut it to."""

    def pick(self, g: np.random.Generator) -> np.ndarray:
        self.rows = super().pick(g)
        return self.rows


@torch.no_grad()
def audit(task: AuditedTask, batches: int, seed: int = 0) -> dict[str, float]:
    """Shares over the prefix rows of `batches` trainer batches (see the module's docstring)."""
    bank, keys = task.whole_bank()
    final_img = torch.from_numpy(task.cache.image("tgt", np.arange(len(task.cache))))
    rows = mined = above = 0
    rng = random.Random(seed)
    for step in range(batches):
        b = task.batch(step, 0, rng)
        f_key = torch.from_numpy(task.cache.tgt_key[task.rows].copy())
        cut = b["t_key"] != f_key  # rows whose positive is an intermediate target
        states = task.model(b["v_r"], b["text"], b["sents"], b["n"]).float()
        idx, valid = mine_hard_negatives(states, b["n"], b["v_t"], bank, keys, b["t_key"],
                                         task.cfg.mine_per_step, task.cfg.mine_cap)
        hit = ((keys[idx] == f_key[:, None]) & valid).any(1)
        q = torch.nn.functional.normalize(final_state(states, b["n"]), dim=-1)
        f_row = torch.tensor([int(np.flatnonzero(task.cache.tgt_key == int(k))[0]) for k in f_key])
        s_final, s_pos = (q * final_img[f_row]).sum(1), (q * b["v_t"]).sum(1)
        rows += int(cut.sum())
        mined += int((hit & cut).sum())
        above += int(((s_final > s_pos) & cut).sum())
    return {"prefix_rows": rows, "final_mined_share": round(mined / max(rows, 1), 4),
            "final_above_positive_share": round(above / max(rows, 1), 4), "batches": batches}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m studies.pace_label_audit", description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--checkpoint", required=True, help="a PACE export folder (model.safetensors)")
    ap.add_argument("--batches", type=int, default=20)
    a = ap.parse_args(argv)
    cfg, _, _ = parse_cli(DEFAULTS, ["--config", a.config], None)
    torch.set_num_threads(max(1, cfg.threads))
    task = AuditedTask(cfg)
    task.model.net.load_state_dict(load_file(f"{a.checkpoint}/model.safetensors"))
    task.model.eval()
    out = {"checkpoint": a.checkpoint, **audit(task, a.batches)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
