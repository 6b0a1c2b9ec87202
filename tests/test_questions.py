"""Questions as data (issue 45): a question is declared once (db/questions.py) and read by the
models, validation, the Annotate tab, the report and the exports; adding one is that declaration
plus one migration. The whole path runs in a fresh interpreter (the models read the registry
when they are imported), on a database made before the question existed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from db import questions
from db.questions import Choice, Metric, Question

ROOT = Path(__file__).resolve().parents[1]

MIGRATION = '''"""Add the urgency question."""
from db.question_schema import add_question, drop_question

revision = "9001"
down_revision = "{head}"
branch_labels = depends_on = None


def upgrade():
    add_question("urgency", ("low", "high"))


def downgrade():
    drop_question("urgency")
'''

SCRIPT = r'''
import json, shutil, sys
from pathlib import Path
tmp = Path(sys.argv[1])
sys.path[:0] = [sys.argv[2], str(Path(sys.argv[2]) / "tests")]

# 1. a database of the workbench before the question: a set, an answer
from _cir_fakes import fake_methods_engine
from db.migrate import init_db
from db.pooling import pool_query_set, world_queries
from db.service import AnnotationService
from db.sqlite import open_db, session_factory
engine = fake_methods_engine()
db = tmp / "ann.sqlite"
svc = AnnotationService(db)
with svc.Session() as s:
    pool_query_set(s, engine, "before", world_queries(engine, 3), ["pact", "sum"], k=2)
st = svc.open("ann", "before")
svc.answer("ann", "before", st.task.task_id, "yes", "no")
svc.close()
del svc
import importlib
for name in [m for m in sys.modules if m == "db" or m.startswith(("db.", "ui", "_cir_fakes"))]:
    del sys.modules[name]

# 2. THE DECLARATION (before the models are imported)
from db import questions
from db.questions import Choice, Metric, Question
questions.declare(Question("urgency", "How urgent is a fix of this result?",
                           (Choice("low", "Not urgent", "J"), Choice("high", "Urgent", "K")),
                           help="whether a wrong result here would hurt a user", metrics=(Metric("urgent", (0.0, 1.0)),)))

from db import migrate
out = {}
with open_db(db).connect() as c:  # the declaration alone: the models and the database differ
    out["diffs_without_migration"] = [d for d in migrate.schema_diffs(c) if "urgency" in d][:3]

# 3. THE MIGRATION (a copy of db/migrations with one more revision: what a developer adds)
scripts = tmp / "migrations"
shutil.copytree(migrate.MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
(scripts / "versions" / "9001_urgency.py").write_text(sys.argv[3].replace("{head}", migrate.head()))
migrate.MIGRATIONS_DIR = scripts
eng = open_db(db)
migrate.init_db(eng)
with eng.connect() as c:
    out["diffs"] = migrate.schema_diffs(c)
out["revision"] = migrate.current(eng)
eng.dispose()

# 4. validation, the service (everything imported again: the old modules read the old registry)
from db.pooling import pool_query_set, world_queries
from db.service import AnnotationService
svc = AnnotationService(db)
engine = __import__("_cir_fakes").fake_methods_engine()
with svc.Session() as s:
    pool_query_set(s, engine, "after", world_queries(engine, 3), ["pact", "sum"], k=2, overlap=1,
                   questions=["urgency"])
out["asked"] = [q.name for q in svc.set_questions("after")]
st = svc.open("ann", "after")
try:
    svc.answer("ann", "after", st.task.task_id, "yes", "no")
    out["refused_without_urgency"] = False
except ValueError as e:
    out["refused_without_urgency"] = "urgency" in str(e)
try:
    svc.answer("ann", "after", st.task.task_id, answers={"identity": "yes", "edit": "no", "urgency": "soon"})
    out["refused_bad_value"] = False
except ValueError as e:
    out["refused_bad_value"] = "urgency" in str(e)

# 5. the Annotate tab: its buttons and key, the screen asks it, three answers save
from ui import annotate, annotate_help
from ui import build_demo
from ui.settings import AppConfig
demo = build_demo(AppConfig(db=str(db)), engine=engine)
ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
out["buttons"] = sorted(i for i in ids if i and i.startswith("ann-urgency"))
out["hotkey"] = annotate_help.KEYS.get("j")
v = annotate.open_view(svc, engine, "ann", "after")
out["row_hidden"] = "#ann-row-urgency" in annotate._render(v)[5]
v = annotate.choose_view(svc, engine, "ann", v.state, "identity", "yes", "")
out["status_after_one"] = v.status.splitlines()[-1]
v = annotate.choose_view(svc, engine, "ann", v.state, "edit", "partial", "")
v = annotate.choose_view(svc, engine, "ann", v.state, "urgency", "high", "")
out["saved"] = "1 / " in v.status
st = svc.open("ann", "after")
while st.task is not None:
    st = svc.answer("ann", "after", st.task.task_id, answers={"identity": "no", "edit": "yes", "urgency": "low"})
from ui import annotation_results
out["guidelines"] = "Urgency" in annotate_help.GUIDELINES

# 6. the report and the exports
from db.export import FIELDS, OWN_FIELDS, export_rows, own_rows, read_csv, write_csv
from db.report import compute_report, format_report
with svc.ReadSession() as s:
    rep = compute_report(s, "after", n_boot=100)
    rows = [r for r in export_rows(s) if r["query_set"] == "after"]
    own = own_rows(s, "ann")
out["report_metrics"] = sorted(rep["methods"][0]["at_1"])
out["report_agreement"] = sorted(rep["agreement"])
out["report_text"] = "urgent" in format_report(rep)
out["summary_md"] = "urgent" in annotation_results.summary_markdown(rep, "ann")
out["export_fields"] = "urgency" in FIELDS and "urgency" in OWN_FIELDS
out["export_values"] = sorted({r["urgency"] for r in rows})
out["own_values"] = sorted({r["urgency"] for r in own if r["query_set"] == "after"})
write_csv(rows, tmp / "j.csv")
out["csv_round_trip"] = read_csv(tmp / "j.csv") == rows
from db.publish import publish
res = publish(str(db), "after", None, out=tmp / "pub", n_boot=100)
import pyarrow.parquet as pq
out["published_columns"] = "urgency" in pq.read_table(tmp / "pub" / "data" / "labels.parquet").column_names
svc.close()
print("RESULT " + json.dumps(out))
'''


def test_a_question_is_one_declaration_plus_one_migration(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(ROOT), MIGRATION], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, proc.stdout[-3000:] + proc.stderr[-5000:]
    out = json.loads(line[len("RESULT "):])
    assert out["diffs_without_migration"], "a declaration without its migration must show as a difference"
    assert out["diffs"] == [] and out["revision"] == "9001"  # the migration builds what the declaration says
    assert out["asked"] == ["identity", "edit", "urgency"]
    assert out["refused_without_urgency"] and out["refused_bad_value"]
    assert out["buttons"] == ["ann-urgency-high", "ann-urgency-low"] and "ann-urgency-low" in out["hotkey"]
    assert not out["row_hidden"] and "Now the edit and urgency questions" in out["status_after_one"] and out["saved"]
    assert out["guidelines"]
    assert "urgent" in out["report_metrics"] and "urgency" in out["report_agreement"]
    assert out["report_text"] and out["summary_md"]
    assert out["export_fields"] and out["export_values"] == ["high", "low"] and out["own_values"] == ["high", "low"]
    assert out["csv_round_trip"] and out["published_columns"]


def test_a_declaration_is_checked() -> None:
    base = dict(prompt="?", help="")
    with pytest.raises(ValueError, match="declared twice"):
        questions.declare(Question("identity", choices=(Choice("a", "A", "J"), Choice("b", "B", "K")), **base))
    for bad, words in [
        (Question("x1", choices=(Choice("a", "A", "1"), Choice("b", "B", "K")), **base), "already answer 'identity'"),
        (Question("x2", choices=(Choice("a", "A", "S"), Choice("b", "B", "K")), **base), "skip, back, next"),
        (Question("x3", choices=(Choice("a", "A", "J"),), **base), "at least two"),
        (Question("status", choices=(Choice("a", "A", "J"), Choice("b", "B", "K")), **base), "not a column"),
        (Question("x4", choices=(Choice("A a", "A", "J"), Choice("b", "B", "K")), **base), "values must be"),
        (Question("x5", choices=(Choice("a", "A", "J"), Choice("b", "B", "K")), metrics=(Metric("m", (1.0,)),),
                  **base), "one number per choice"),
    ]:
        assert words in (questions.question_problem(bad, questions.QUESTIONS) or ""), bad.name
    # the same keys may answer questions of different modes (a screen shows one mode's)
    assert questions.question_problem(Question("x6", choices=(Choice("a", "A", "1"), Choice("b", "B", "K")),
                                               mode="pairwise", **base), questions.QUESTIONS) is not None  # 1: A
    assert questions.question_problem(Question("x7", choices=(Choice("a", "A", "Q"), Choice("b", "B", "K")),
                                               mode="pairwise", **base), questions.QUESTIONS) is None
