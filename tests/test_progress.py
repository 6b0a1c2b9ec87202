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
