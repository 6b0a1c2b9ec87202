"""Shared test setup: everything runs offline and quietly."""
import os

# Set before open_clip / huggingface_hub / gradio are imported: they read these at import time.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~15 s on 2 CPU cores")
