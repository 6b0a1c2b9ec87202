"""Issue 27, item 2: an acknowledged judgment survives the file system failing under the DB.

The real write path (`db.serve`: one transaction per judgment, the reply after the commit) on
a loop-mounted ext4 that is made to fail mid-run (ext4's own error hook: the journal aborts and
every page not yet on the device is dropped, as an OS crash or a power cut drops them). Needs
root and loop devices (bench/fault_annotation.py says what is missing); skipped otherwise.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("fault_annotation", ROOT / "bench" / "fault_annotation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


fault = _bench()
pytestmark = pytest.mark.skipif(fault.unavailable() is not None,
                                reason=f"no loop-mounted ext4 here: {fault.unavailable()}")


def test_full_sync_loses_nothing_acknowledged(tmp_path: Path) -> None:
    run = fault.run_fault(tmp_path, "FULL", clients=6, per_client=20)
    before, _ = fault.split_lost(run)
    assert run.acked_at_fault is not None and run.replies_after_fault  # the fault landed mid-run
    assert before == [] and run.verification.integrity == ["ok"]
    assert fault.report(run).rstrip().endswith("RESULT: PASS")


def test_the_fault_is_real_normal_sync_loses_acknowledged_writes(tmp_path: Path) -> None:
    """The control: what the app did before (synchronous=NORMAL fsyncs only at checkpoints)
    loses writes it had acknowledged. Without this the test above could pass on a fault that
    drops nothing."""
    run = fault.run_fault(tmp_path, "NORMAL", clients=6, per_client=20)
    before, _ = fault.split_lost(run)
    assert len(before) > 0 and "FAIL" in fault.report(run)


def test_an_io_error_is_named_and_the_answer_checked(tmp_path: Path) -> None:
    """Item 4 on a real failing disk: the save after the fault is reported as an I/O error, with
    the answer read back (not in the database), never as "busy (nothing was lost)"."""
    from test_annotate_guard import SET, _service

    from db.faults import DBFault

    with fault.loop_fs(tmp_path) as fs:
        svc = _service(fs.mnt / "ann.sqlite")
        st = svc.open("ann", SET)
        st = svc.answer("ann", SET, st.task.task_id, "yes", "no")
        fs.fail()
        with pytest.raises(DBFault) as err:
            svc.answer("ann", SET, st.task.task_id, "no", "no")
        svc.close()
    f = err.value
    assert (f.kind, f.writing) == ("io_error", True) and f.saved in (False, None)
    assert "I/O error" in f.message() and "organiser" in f.message()
