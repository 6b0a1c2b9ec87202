"""cir_core.progress: a tqdm bar in a terminal, a few plain lines in a log."""
import io

from cir_core.progress import LogLines, bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_few_plain_lines_not_a_redraw_per_update(monkeypatch):
    monkeypatch.delenv("CIR_PROGRESS_INTERVAL", raising=False)
    log = io.StringIO()
    for _ in bar(range(5000), desc="embedding", unit="image", file=log, miniters=1):
        pass
    text = log.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and len(lines) <= 3  # the start, maybe one in between, the end
    assert lines[-1].startswith("embedding: 100%") and "5000/5000" in lines[-1]
    assert all(line == line.rstrip() and line.isascii() for line in lines)


def test_the_interval_is_a_setting(monkeypatch):
    monkeypatch.setenv("CIR_PROGRESS_INTERVAL", "0")
    log = io.StringIO()
    with bar(total=4, desc="shards", file=log) as b:
        for _ in range(4):
            b.update(1)
    assert [line.split("|")[0].strip() for line in log.getvalue().splitlines()][:5] == [
        "shards:   0%", "shards:  25%", "shards:  50%", "shards:  75%", "shards: 100%"]


def test_a_terminal_gets_tqdm_as_it_is(monkeypatch):
    monkeypatch.delenv("CIR_PROGRESS_INTERVAL", raising=False)
    term = Terminal()
    for _ in bar(range(3), desc="x", file=term):
        pass
    assert "\r" in term.getvalue()  # redrawn in place
    assert bar(range(3), disable=True, file=io.StringIO()).disable


def test_log_lines_drops_tqdm_clears():
    out = io.StringIO()
    w = LogLines(out)
    w.write("\r" + " " * 40 + "\r")
    w.write("\rstep: 10%|#  | 1/10   ")
    w.write("\n")
    assert out.getvalue() == "step: 10%|#  | 1/10\n"


def test_tracked_work_is_listed_with_n_of_n_and_an_eta_while_it_runs():
    """What the app shows while it waits (issue 44): n/N, the time so far, the time left."""
    from cir_core.progress import running, tracked, tracked_tqdm

    with tracked("embedding g", total=100, unit="image", log=False) as task:
        assert [t.line() for t in running()] == ["embedding g: 0/100 images · 00:00 elapsed"]
        task.started -= 20  # 20 s in, a quarter done: 60 s left at that rate
        task.update(25)
        assert running()[0].line() == "embedding g: 25/100 images · 00:20 elapsed · about 01:00 left"
    assert running() == []
    bar_cls = tracked_tqdm()  # a library's own bar (huggingface_hub's snapshot_download) listed too
    b = bar_cls(total=4, desc="Fetching 4 files", unit="file", file=io.StringIO())
    b.update(2)
    assert [t.line().split(" · ")[0] for t in running()] == ["Fetching 4 files: 2/4 files"]
    b.close()
    assert running() == []
