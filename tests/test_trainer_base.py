"""training.task: every method trainer exports through one base (λ on val, Method.save, nothing
from a run stopped early); the loop's resumable state is checked like every checkpoint."""
import pytest

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.errors import CheckpointError
from training.loop import run, saved_step
from training.task import CachedHeadTask, MethodSettings, MethodTask
from training.train_dice import DEFAULTS, DiCETask
from training.trainers import get_trainer, list_trainers

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_method_trainer_is_a_method_task():
    method_trainers = [n for n in list_trainers() if get_trainer(n).method]
    assert {"pact", "compose-only", "dice", "pace", "pic2word", "searle", "lincir"} <= set(method_trainers)
    for name in method_trainers:
        t = get_trainer(name)
        assert issubclass(t.task_class(), MethodTask), name
        assert isinstance(__import__(t.module, fromlist=["DEFAULTS"]).DEFAULTS, MethodSettings), name


def test_the_catalogue_imports_every_module_that_registers_a_trainer():
    """training.trainers imports the trainer modules by name: one left out would vanish from
    build_assets and the GPU smoke check without a word."""
    from pathlib import Path

    import training.trainers as catalogue
    here = Path(catalogue.__file__).parent
    registering = {p.stem for p in here.glob("*.py")
                   if "register_trainer(" in p.read_text(encoding="utf-8") and p.stem != "registry"}
    assert registering and registering <= set(vars(catalogue)), sorted(registering - set(vars(catalogue)))


def test_a_run_stopped_early_exports_nothing(head_cfg, tiny_backbone, tmp_path, capsys):
    cfg = head_cfg(DEFAULTS, steps=4)
    task = DiCETask(cfg, tiny_backbone)
    assert isinstance(task, CachedHeadTask) and task.val is None  # val_queries 0 on the world
    run(task, cfg)
    assert (tmp_path / "export" / "config.json").is_file() and saved_step(tmp_path / "run") == 4
    more = head_cfg(DEFAULTS, steps=6, export_dir=str(tmp_path / "again"))
    task = DiCETask(more, tiny_backbone)
    task.export(tmp_path / "run", {})  # the run folder holds 4 of 6 steps
    assert "stopped at step 4 of 6: not exported" in capsys.readouterr().out
    assert not (tmp_path / "again").exists()


def test_resuming_with_another_architecture_is_refused(head_cfg, tiny_backbone, tmp_path):
    cfg = head_cfg(DEFAULTS, steps=2, ckpt_every=1)
    run(DiCETask(cfg, tiny_backbone), cfg)
    wider = head_cfg(DEFAULTS, steps=4, hidden_mult=2.0)
    with pytest.raises(CheckpointError, match=r"last/model.safetensors does not fit this run's model.*has shape"):
        run(DiCETask(wider, tiny_backbone), wider)


@pytest.mark.parametrize("key", ["steps", "eval_every", "ckpt_every", "log_every", "grad_accum"])
def test_a_zero_interval_is_refused_by_key_before_training(head_cfg, tiny_backbone, tmp_path, key):
    cfg = head_cfg(DEFAULTS, **{key: 0})
    with pytest.raises(SystemExit, match=f"{key} must be a whole number >= 1, got 0"):
        run(DiCETask(cfg, tiny_backbone), cfg)
    assert saved_step(tmp_path / "run") == 0
