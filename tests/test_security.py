"""No server paths through any handler (issue 15, item 1): the figure export's query list, the
Compare upload slot (button, Enter, the upload event), the `/compare` API and the Figures tab's
upload slot accept gallery ids and files Gradio itself uploaded, nothing else — not absolute
paths, not `..`, not symlinks, not a FileData naming some other file in Gradio's cache — and the
refusal reads the same whether the path exists or not. Plus the CLI's image root."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cir_fakes import N_QUERIES, fake_methods_engine, plain
from _gradio_raw import call, file_data, fn_index

from cir_core.errors import InputError
from cir_core.figures import PATHS_REFUSED, build_panels, export, parse_entries, resolve_image_path
from ui.figures import CURRENT, LISTED
from ui.settings import AppConfig
from ui.uploads import REFUSED, UploadRefused, uploaded_path

EDIT = "Make the square blue."


@pytest.fixture(scope="module")
def engine():
    return fake_methods_engine()


@pytest.fixture(scope="module")
def places(tmp_path_factory, engine):
    """A real image outside every allowed place, a missing path, a symlink to the image, `..`."""
    root = tmp_path_factory.mktemp("secret")
    secret = root / "secret.png"
    engine.view.image(5, 64).save(secret)
    link = root / "link.png"
    link.symlink_to(secret)
    return {"secret": secret, "link": link,
            "paths": [str(secret), str(root / "missing.png"), str(link), "/etc/shadow", "/etc/hostname",
                      "../../../../../../etc/hostname", f"{root}/../{root.name}/secret.png",
                      "relative/secret.png"]}


# -- the rule itself ------------------------------------------------------------------------------

def test_uploaded_path_refuses_everything_but_this_apps_uploads(tmp_path, places):
    folder = tmp_path / "gradio"
    up = folder / "abc123" / "photo.png"
    up.parent.mkdir(parents=True)
    up.write_bytes(b"x")
    (folder / "abc123" / "out.png").symlink_to(places["secret"])  # a symlink planted in the folder
    known = {str(up)}
    assert uploaded_path(None, known, str(folder)) is None and uploaded_path("", known, str(folder)) is None
    assert uploaded_path(str(up), known, str(folder)) == str(up)
    assert uploaded_path({"path": str(up)}, known, str(folder)) == str(up)
    bad = [*places["paths"], str(folder / "abc123" / "out.png"), f"{folder}/abc123/../abc123/photo.png",
           f"{folder}//abc123/photo.png", str(folder), str(folder / "abc123" / "other.png"), "x\x00y", 42, ["a"]]
    for p in bad:
        with pytest.raises(UploadRefused) as err:
            uploaded_path({"path": p}, known, str(folder))
        assert str(err.value) == REFUSED  # one message: nothing about the path or its existence
    with pytest.raises(UploadRefused):  # in the folder, but never uploaded (e.g. someone's export)
        uploaded_path(str(up), set(), str(folder))


def test_query_lists_name_no_files_without_an_image_root(places):
    msgs = set()
    for p in places["paths"]:
        with pytest.raises(InputError) as err:
            parse_entries([{"reference_path": p, "text": EDIT}])
        msgs.add(str(err.value))
    assert msgs == {f"query #1: {PATHS_REFUSED}"}  # identical for existing, missing, /etc/shadow, ..
    with pytest.raises(InputError, match="not accepted"):  # a dict that skipped parse_entries
        build_panels(None, [{"reference_path": str(places["secret"]), "text": EDIT}], ["pact"])  # type: ignore[arg-type]
    for raw in ('{"queries": [{"upload": "/etc/hostname", "text": "x"}]}',  # the app's own key
                json.dumps([{"reference_path": str(places["secret"]), "text": EDIT}])):
        with pytest.raises(InputError):
            parse_entries(raw)


def test_cli_image_root(places, tmp_path):
    root = places["secret"].parent
    assert resolve_image_path("secret.png", root) == places["secret"]
    assert parse_entries([{"reference_path": "secret.png", "text": EDIT}], image_root=root)
    inner = tmp_path / "root"
    inner.mkdir()
    (inner / "out.png").symlink_to(places["secret"])
    for p in (str(places["secret"]), "../secret/secret.png", "out.png", "/etc/hostname", "missing/../../x.png"):
        with pytest.raises(InputError, match="not under the image root"):
            resolve_image_path(p, inner)


def test_an_upload_export_regenerates_from_its_folder(engine, tmp_path):
    """The app's upload goes into the exported JSON as a copy beside it, named by file name only;
    the CLI (image root: the JSON's folder) reads it back. No server path in the JSON."""
    up = tmp_path / "upload" / "photo.png"
    up.parent.mkdir()
    engine.view.image(7, 96).save(up)
    out = tmp_path / "out"
    res = export(engine, [{"upload": str(up), "name": "photo.png", "text": EDIT}], ["pact"],
                 [out / "f.png", out / "f.json"], k=2)
    spec = json.loads((out / "f.json").read_text())
    assert spec["queries"] == [{"reference_path": "f-ref1.png", "text": EDIT}]
    assert res.references == [out / "f-ref1.png"] and (out / "f-ref1.png").read_bytes() == up.read_bytes()
    assert str(tmp_path) not in (out / "f.json").read_text()
    entries = parse_entries(spec, image_root=out)
    again = export(engine, entries, ["pact"], [tmp_path / "again.png"], k=2, image_root=out)
    assert len(again.panels[0].rows[0][1]) == 2


# -- every handler of the launched app -------------------------------------------------------------

@pytest.fixture(scope="module")
def app(engine, tmp_path_factory):
    from test_app_live import _free_port

    from ui import build_demo, launch_kwargs

    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(),
                    db=str(tmp_path_factory.mktemp("db") / "ann.sqlite"))
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        yield demo
    finally:
        demo.close()


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    return Client(app.local_url, verbose=False)


@pytest.fixture(scope="module")
def cache_file(app, client, engine, tmp_path_factory):
    """A file in Gradio's cache that was never uploaded: the PNG of a figure this app exported
    (what another user's export looks like to an attacker who learns its path)."""
    out = client.predict(LISTED, "test-00001", "", None, EDIT, ["pact"], 2, "Cosine", True, 0.3, True, True,
                         api_name="/export_figure")
    files = out[1]
    path = (files[0] if isinstance(files[0], str) else files[0]["path"]) if files else None
    assert path and Path(path).is_file()
    from gradio.utils import get_upload_folder

    from ui.tempfiles import TEMP

    # gradio_client hands back its own downloaded copy; the server's file is in the app's own
    # temporary root, which also holds Gradio's folder (GRADIO_TEMP_DIR, ui/tempfiles.py).
    assert Path(get_upload_folder()).is_relative_to(TEMP.root)
    server = [f for f in TEMP.root.rglob(Path(path).name) if f.is_file()]
    assert len(server) == 1, (path, TEMP.root)
    return str(server[0])


@pytest.fixture(scope="module")
def planted_link(places):
    """A symlink planted inside Gradio's upload folder, pointing at the secret image."""
    from gradio.utils import get_upload_folder

    d = Path(get_upload_folder()) / "cir-test-planted"
    d.mkdir(parents=True, exist_ok=True)
    link = d / "planted.png"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(places["secret"])
    yield str(link)
    link.unlink()


def _export_listed(client, listed: str):
    return client.predict(LISTED, listed, "", None, "", ["pact"], 2, "Cosine", True, 0.3, True, True,
                          api_name="/export_figure")


def test_export_figure_refuses_server_paths(client, places):
    """The reproducer: /export_figure with a reference_path outside the allowed places."""
    statuses = set()
    for p in places["paths"]:
        preview, files, status = _export_listed(client, json.dumps([{"reference_path": p, "text": EDIT}]))
        assert preview is None and not files
        statuses.add(plain(status))
    assert statuses == {f"⚠ query #1: {PATHS_REFUSED}"}
    good = _export_listed(client, "test-00001")
    assert good[0] is not None and len(good[1]) == 3  # a gallery query still exports


def test_a_deeply_nested_query_list_is_a_message(client):
    """Issue 27: 5,000 nested lists made json.loads raise RecursionError out of the handler."""
    for raw in ("[" * 5000 + "]" * 5000, '{"queries": ' + "[" * 9 + "]" * 9 + "}"):
        with pytest.raises(InputError, match="nests deeper than 8"):
            parse_entries(raw)
        preview, files, status = _export_listed(client, raw)
        assert preview is None and not files and "nests deeper than 8 levels" in plain(status)
    assert _export_listed(client, '[{"query_id": "test-00001"}]')[0] is not None  # 2 levels: fine


def test_export_figure_upload_slot_takes_only_uploads(app, client, cache_file, planted_link, places):
    idx = fn_index(app, api_name="export_figure")
    for p in (cache_file, planted_link, str(places["secret"]), "/etc/hostname"):
        msg = call(app.local_url, idx, [CURRENT, "", "", file_data(p), EDIT, ["pact"], 2, "Cosine", True,
                                        0.3, True, True, "text", True, False, False])
        # In Gradio's folder (an export's PNG), it reaches our check, which refuses it; anything
        # else Gradio's own preprocessing refuses before the handler runs.
        assert msg["success"] == (p == cache_file), (p, msg)
        if msg["success"]:
            preview, files, status = msg["output"]["data"]
            assert preview is None and files is None and plain(status) == f"⚠ {REFUSED}"


def test_compare_api_refuses_server_paths(client, cache_file, planted_link, places):
    # gr.api endpoints get the FileData dict unprocessed: only our check stands in the way. (A
    # dict with "meta" would make gradio_client upload the client's own local file: legitimate.)
    for p in [*places["paths"], cache_file, planted_link]:
        res = client.predict("", EDIT, 2, "cosine", None, {"path": p}, api_name="/compare")
        assert res == {"error": REFUSED}, p


def test_compare_button_and_upload_event_refuse_other_files(app, cache_file, planted_link, places):
    view = fn_index(app, api_name="compare_view")
    upload = fn_index(app, fn_name="on_upload")
    for p in (cache_file, planted_link, str(places["secret"])):
        msg = call(app.local_url, view, ["", file_data(p), EDIT, 2, "Cosine", True, 0.3, []])
        assert msg["success"] == (p == cache_file), (p, msg)
        if msg["success"]:
            status = msg["output"]["data"][0]
            assert plain(status) == f"⚠ {REFUSED}", p
            assert all(not g or (isinstance(g, dict) and not g.get("value"))
                       for g in msg["output"]["data"][2:-1] if isinstance(g, (list, dict)))
        msg = call(app.local_url, upload, [file_data(p), ""])  # (the upload, the reference id box)
        assert msg["success"] == (p == cache_file), (p, msg)
        if msg["success"]:
            cleared, _, _, info = msg["output"]["data"]
            assert cleared is None and REFUSED in plain(info)
        # (when not a success, Gradio itself refused the path before any handler ran)


def test_a_real_upload_still_works(client, engine, tmp_path):
    from gradio_client import handle_file

    p = tmp_path / "mine.png"
    engine.view.image(3, 80).save(p)
    res = client.predict("", EDIT, 2, "cosine", None, handle_file(str(p)), api_name="/compare")
    assert "error" not in res and res["reference"]["kind"] == "upload"
    # through the Compare button's gr.File slot too (Gradio copies it into its cache: same file)
    out = client.predict("", handle_file(str(p)), EDIT, 2, "Cosine", True, 0.3, [], api_name="/compare_view")
    assert "Uploaded reference" in plain(out[0]) and REFUSED not in plain(out[0])


# -- temporary files (issue 15, item 5) -----------------------------------------------------------

def test_export_folders_are_swept_and_removed(engine, tmp_path):
    import glob
    import tempfile
    import time

    from ui.figures import export_view
    from ui.tempfiles import TempDirs

    top = lambda: set(glob.glob(f"{tempfile.gettempdir()}/cir-figure-*") +  # noqa: E731
                      glob.glob(f"{tempfile.gettempdir()}/cir-judgments-*"))
    before = top()
    dirs = TempDirs(ttl_s=60, parent=tmp_path, sweeper=False)
    import ui.figures as figs

    real, figs.TEMP = figs.TEMP, dirs
    try:
        view = export_view(engine, LISTED, "test-00001", "", None, "", ["pact"], k=1)
    finally:
        figs.TEMP = real
    assert view.error is None and all(Path(f).is_relative_to(dirs.root) for f in view.files)
    assert top() == before  # nothing left at the top of the system temp folder
    assert dirs.sweep() == 0  # young: kept for the download
    assert dirs.sweep(now=time.time() + 61) == 1 and not any(Path(f).exists() for f in view.files)
    dirs.new("cir-judgments-")
    root = dirs.root
    dirs.close()  # what atexit (and SIGTERM) run
    assert not root.exists()


def test_a_killed_processs_export_folders_go_at_the_next_start(tmp_path):
    import os

    from ui.tempfiles import TempDirs

    dead = tmp_path / "cir-app-999999999-abc"  # no such pid runs
    (dead / "cir-judgments-x").mkdir(parents=True)
    (dead / "cir-judgments-x" / "judgments-alice.csv").write_text("a comment")
    mine = tmp_path / f"cir-app-{os.getpid()}-old"
    mine.mkdir()
    dirs = TempDirs(parent=tmp_path, sweeper=False, serve=False)
    root = dirs.root
    assert not dead.exists() and mine.exists() and root.name.startswith(f"cir-app-{os.getpid()}-")
    dirs.close()


def test_every_event_of_a_concurrency_group_carries_its_limit(app):
    """Gradio keeps the lowest limit of a shared group and an event without one has 1: Compare's
    "compare" group (button, Enter, /compare) would otherwise run one request at a time."""
    from ui.compare import compare_concurrency

    groups: dict = {}
    for fn in app.fns.values():
        if fn.concurrency_id is not None:
            groups.setdefault(fn.concurrency_id, set()).add(fn.concurrency_limit)
    want = compare_concurrency(AppConfig(world_queries=N_QUERIES))  # batching on: max_requests + headroom
    assert groups["compare"] == {want} and want > 2
    assert all(len(limits) == 1 for limits in groups.values()), groups
