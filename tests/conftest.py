"""Shared test setup: everything runs offline and quietly."""
import os

# Set before open_clip / huggingface_hub / gradio are imported: they read these at import time.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
# Spinning OpenMP threads collapse throughput on shared cores (10x measured); libgomp reads this
# when torch/faiss first load, and a test module may import torch before cir_core.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# The slow lane: whole modules that drive a browser, launch the app or a server process, train,
# run torchrun or a rehearsal, or export the world. `pytest -m "not slow"` is the fast inner lane
# (README: its time); CI runs everything. A single slow test elsewhere carries @pytest.mark.slow.
SLOW_MODULES = frozenset({
    # a browser (headless Chromium) or the launched app
    "test_app_live", "test_app_widths", "test_app_a11y", "test_app_state", "test_app_progress", "test_app_why",
    "test_app_films", "test_walkthrough", "test_annotate_live", "test_annotate_movienet_live", "test_annotate_buttons",
    "test_hub_gallery_live", "test_http_guard", "test_annotate_guard", "test_handler_walk", "test_security",
    "test_review_live", "test_organiser_live", "test_pairwise_live", "test_milvus", "test_milvus_live",
    # training, torchrun, rehearsals, world exports, servers, whole-pipeline runs
    "test_rehearse_real", "test_world_export", "test_pact", "test_movienet_rehearsal", "test_reproduce",
    "test_searle", "test_plugin_method", "test_real_training", "test_dice", "test_index_build",
    "test_peer_equivalence", "test_quickgelu", "test_movienet_build", "test_concurrency", "test_stress_small",
    "test_gpu_smoke", "test_gpu_reproduce_smoke", "test_bench_films", "test_movienet_release", "test_durability",
    "test_postgres", "test_blind", "test_batching", "test_progression_overtakers", "test_progression_oracle",
    "test_pace", "test_lincir", "test_pic2word", "test_rtd", "test_atomic_folder", "test_load_bench",
    "test_figures", "test_hub_gallery", "test_rehearse_movienet", "test_publish", "test_questions", "test_review",
})


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~15 s on 2 CPU cores (the slow lane)")


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        if item.module.__name__.rpartition(".")[2] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_backbone():
    """The project's tiny architecture with random weights: fast, offline, deterministic."""
    from cir_core.backbone import load_backbone

    return load_backbone("cir-tiny-vit", pretrained=None, seed=0)


@pytest.fixture(scope="session")
def small_bench():
    from cir_core.world import build_benchmark

    return build_benchmark("test", 24)


@pytest.fixture(scope="session")
def train_cache_root(tmp_path_factory):
    """Where the DiCE/PACE tests keep their embed caches (train queries and val gallery)."""
    return tmp_path_factory.mktemp("train-cache")


@pytest.fixture(scope="session")
def train_cache(tiny_backbone, train_cache_root):
    """Frozen embeddings of 48 world training queries (tiny backbone, random weights)."""
    import torch

    from training.embed_cache import build_train_cache

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # see one_thread
    try:
        return build_train_cache(tiny_backbone, 48, seed=0, root=train_cache_root, progress=False)
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def head_cfg(train_cache, train_cache_root, tmp_path):
    """make(defaults, key=value...) -> small settings (of the trainer's own type) for the
    DiCE/PACE trainers on the `train_cache` queries: CPU, no validation unless val_queries is given."""
    def make(defaults, **kw):
        base = {"backbone": "cir-tiny-vit", "n_train": 48, "cache_root": str(train_cache_root),
                "val_cache_root": str(train_cache_root / "val"), "val_queries": 0, "batch_size": 16,
                "warmup": 2, "steps": 4, "eval_every": 1000, "ckpt_every": 1000, "log_every": 1000,
                "device": "cpu", "threads": 0, "out_dir": str(tmp_path / "run"),
                "export_dir": str(tmp_path / "export"), **kw}
        return type(defaults).from_dict({**defaults.to_dict(), **base}, strict=True)

    return make


@pytest.fixture
def one_thread():
    """torch on one thread for the test, restored after: small ops on 2 threads collapse (10-20x)
    when another process holds a core, and these tests are all small ops."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's, test_walkthrough.CHROMIUM) driven by playwright, one per module
    that asks for it; a module without Chromium skips itself before this runs."""
    from playwright.sync_api import sync_playwright
    from test_walkthrough import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
