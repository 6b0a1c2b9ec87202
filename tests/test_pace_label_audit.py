"""studies.pace_label_audit: on the PACE trainer's own batches, how often a prefix row's own final
target is mined as one of its negatives."""
import random

import numpy as np
import pytest

from studies.pace_label_audit import AuditedTask, audit
from training.train_pace import DEFAULTS, PACETask

pytestmark = pytest.mark.usefixtures("one_thread")


def test_audited_task_draws_the_trainers_batches(head_cfg, tiny_backbone):
    """The audit records each batch's cache rows without changing a draw: its batches are the
    trainer's, key for key."""
    cfg = head_cfg(DEFAULTS, long_fraction=0.7, prefix_fraction=1.0, prefix_target="intermediate")
    a, b = PACETask(cfg, tiny_backbone), AuditedTask(cfg, tiny_backbone)
    x, y = a.batch(0, 0, random.Random(4)), b.batch(0, 0, random.Random(4))
    assert set(x) == set(y) and all(bool((x[k] == y[k]).all()) for k in x)
    np.testing.assert_array_equal(b.cache.image("ref", b.rows), y["v_r"].numpy())  # the rows it records


def test_label_audit_counts_prefix_rows_whose_final_target_is_mined(head_cfg, tiny_backbone):
    cfg = head_cfg(DEFAULTS, long_fraction=0.7, prefix_fraction=1.0, prefix_target="intermediate")
    task = AuditedTask(cfg, tiny_backbone)
    out = audit(task, batches=2)
    rng, cut = random.Random(0), 0
    for s in range(2):
        b = task.batch(s, 0, rng)
        cut += int((b["t_key"].numpy() != task.cache.tgt_key[task.rows]).sum())
    assert out["prefix_rows"] == cut > 0
    assert 0 <= out["final_mined_share"] <= 1 and 0 <= out["final_above_positive_share"] <= 1
