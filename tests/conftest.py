"""Shared test setup: everything runs offline and quietly."""
import os

# Set before open_clip / huggingface_hub / gradio are imported: they read these at import time.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~15 s on 2 CPU cores")


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
