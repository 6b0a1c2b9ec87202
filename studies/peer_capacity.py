"""Why the zero-shot peers lose (issue 25, item 6): what one pseudo-token can carry through the
backbone's text tower, measured.

    python -m studies.peer_capacity [--benchmark films|world] [--n 200] [--steps 300] [--json out.json]

For the first `n` test queries, each reference image v_r is *inverted*: a single token w is
optimised (AdamW, lr 2e-2, `--steps` steps, w ~ N(0, 0.02²) at the start: SEARLE's OTI without
its GPT-phrase term) so that f_T("a photo of $") with w at $ matches v_r. Then, on the
benchmark's gallery:

- **back**: q = f_T("a photo of w") — does the inverted token retrieve its own image (the
  reference is *not* removed here: rank of v_r, R@1/R@10), and the reference's character (the
  top-1 excluding the reference shows it: identity@1)? What one token carries of an image;
- **oracle**: q = f_T("a photo of w that {edit}") scored as every method is (reference removed)
  — the best a textual-inversion peer could do if its φ were as good as per-image optimisation;
  **oracle_token_last**: f_T("{edit} a photo of w"), the token after the edit (its first 35
  words, to fit the context; a diagnostic of where in the prompt the tower keeps it, not a
  peer's protocol);
- beside them, on the same queries, the **sum** baseline and each trained peer's own φ
  (Pic2Word, SEARLE, LinCIR from their shipped checkpoints), and the cosine of each peer's token
  to the inverted one.

If the oracle stays below the sum baseline, the cause is the route itself (one token through this
text tower), not the peers' training; if it beats sum while the peers do not, their φ is.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.report_header import write_report

PEERS = ("pic2word", "searle", "lincir")


def invert(text: Any, targets: torch.Tensor, prompt: str, steps: int, lr: float = 2e-2,
           batch: int = 64, seed: int = 0) -> torch.Tensor:
    """(N, W) tokens: each w_i optimised so that f_T(prompt with w_i) has cosine 1 with targets[i]."""
    out = []
    tokens_one = text.tokenize([prompt])
    for s in range(0, len(targets), batch):
        v = targets[s:s + batch]
        g = torch.Generator().manual_seed(seed + s)
        w = torch.nn.Parameter(torch.randn(len(v), text.width, generator=g) * 0.02)
        opt = torch.optim.AdamW([w], lr=lr, weight_decay=0.01)
        tokens = tokens_one.repeat(len(v), 1)
        for _ in range(steps):
            loss = (1 - F.cosine_similarity(text.encode(tokens, w), v, dim=-1)).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        out.append(w.detach())
    return torch.cat(out)


@torch.no_grad()
def encode_with(text: Any, prompts: list[str], w: torch.Tensor) -> np.ndarray:
    q = F.normalize(text.encode(text.tokenize(prompts), w).float(), dim=-1)
    return q.cpu().numpy()


def ranks_of(q: np.ndarray, g: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """0-based rank of gallery row rows[i] for query i (ties to the lower row)."""
    from cir_core.metrics import target_ranks

    return target_ranks(q @ g.T, rows)


def evaluate_queries(bench: Any, q: np.ndarray, g: np.ndarray, rows: np.ndarray) -> dict[str, float]:
    """R@1 / R@10 / identity@1 of queries `q` for the benchmark's queries at `rows` (cosine,
    reference removed), through the benchmark's own ground truth."""
    from cir_core.metrics import set_recall_at_k

    t = bench.truth
    s = q @ g.T
    s[np.arange(len(rows)), t["ref"][rows]] = -np.inf
    ranked = np.argsort(-s, axis=1, kind="stable")[:, :10]
    gt = [t["gt"][i] for i in rows] if "gt" in t else None
    rec = set_recall_at_k(ranked, gt, (1, 10))
    ids = t["identities"]
    chars = [t["character"][i] for i in rows] if "character" in t else list(ids[t["ref"][rows]])
    same = [(c in ids[r[0]]) if isinstance(ids[r[0]], frozenset) else ids[r[0]] == c for c, r in zip(chars, ranked)]
    return {**{k: round(v, 4) for k, v in rec.items()}, "identity@1": round(float(np.mean(same)), 4)}


def run(benchmark: str, n: int, steps: int, threads: int = 1) -> dict[str, Any]:
    from cir_core.backbone import load_backbone
    from cir_core.benchmarks import load_benchmark
    from cir_core.benchmarks.common import compose_queries, refs_at
    from cir_core.eval.loop import embed_benchmark
    from cir_core.methods import create_method
    from cir_core.methods.pseudoword import PseudoWord
    from cir_core.paths import DEFAULT_BACKBONE

    torch.set_num_threads(threads)
    bb = load_backbone(DEFAULT_BACKBONE)
    bench = load_benchmark(benchmark, split="test", image_size=bb.image_size)
    data = embed_benchmark(bench, bb)
    g, norms = data.emb["gallery"], data.norms["gallery"]
    t = bench.truth
    rows = np.arange(min(n, bench.n_queries()))
    queries = [bench.films.queries[i] if benchmark == "films" else bench.world.queries[i] for i in rows]
    ref_rows = t["ref"][rows]
    text = PseudoWord(bb.tokenizer, bb.model, "$")
    for p in bb.model.parameters():
        p.requires_grad_(False)
    t0 = time.time()
    w = invert(text, torch.from_numpy(g[ref_rows]), "a photo of $", steps)
    seconds = time.time() - t0
    back = encode_with(text, ["a photo of $"] * len(rows), w)
    r = ranks_of(back, g, ref_rows)
    cos_back = float(np.mean(np.sum(back * g[ref_rows], 1)))
    s = back @ g.T
    s[np.arange(len(rows)), ref_rows] = -np.inf
    top = s.argmax(1)
    ids = t["identities"]
    chars = [t["character"][i] for i in rows] if "character" in t else list(ids[ref_rows])
    same = [(c in ids[j]) if isinstance(ids[j], frozenset) else ids[j] == c for c, j in zip(chars, top)]
    out: dict[str, Any] = {
        "benchmark": benchmark, "n_queries": len(rows), "steps": steps, "backbone": bb.id,
        "invert_seconds": round(seconds, 1),
        "back": {"cos_to_image": round(cos_back, 4), "R@1": round(float((r < 1).mean()), 4),
                 "R@10": round(float((r < 10).mean()), 4), "median_rank": float(np.median(r)),
                 "identity@1": round(float(np.mean(same)), 4)},
    }
    edits = [" ".join(q.text.split()) for q in queries]
    out["oracle"] = evaluate_queries(bench, encode_with(text, [f"a photo of $ that {e}" for e in edits], w), g, rows)
    # a diagnostic, not a peer's protocol: the same token after the edit, the last word before
    # the end token the causal tower pools
    out["oracle_token_last"] = evaluate_queries(
        bench, encode_with(text, [f"{' '.join(e.split()[:35])} a photo of $" for e in edits], w), g, rows)
    refs = refs_at(g, norms, ref_rows)
    summ = create_method("sum", bb)
    out["sum"] = evaluate_queries(bench, compose_queries(summ, refs, [[q.text] for q in queries]).q, g, rows)
    out["image-only"] = evaluate_queries(bench, g[ref_rows], g, rows)
    for name in PEERS:
        try:
            m = create_method(name, bb)
        except Exception as exc:  # a checkpoint missing or for another backbone: say so, go on
            out[name] = {"error": str(exc).splitlines()[0]}
            continue
        with torch.no_grad():
            tok = m.mapper(torch.from_numpy(m.phi_input(refs)))
        out[name] = {**evaluate_queries(bench, compose_queries(m, refs, [[q.text] for q in queries]).q, g, rows),
                     "token_cos_to_inverted": round(float(F.cosine_similarity(tok, w, dim=-1).mean()), 4),
                     "token_norm": round(float(tok.norm(dim=-1).mean()), 3)}
    out["inverted_token_norm"] = round(float(w.norm(dim=-1).mean()), 3)
    out["word_token_norm"] = round(float(bb.model.token_embedding.weight.norm(dim=-1).mean()), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.peer_capacity", description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmark", default="films", choices=("films", "world"))
    ap.add_argument("--n", type=int, default=200, help="the first n test queries")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    out = run(a.benchmark, a.n, a.steps, a.threads)
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        write_report(a.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
