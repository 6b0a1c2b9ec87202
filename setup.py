"""The one thing pyproject.toml cannot say: the repo's top-level `assets/` folder (the shipped
world: tiny backbone, method checkpoints, gallery embeddings) is installed as `cir_core/assets`,
where `cir_core.paths` finds it outside a checkout. Everything else is in pyproject.toml."""
from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["cir_core*", "db*", "ui*", "training*"]), "cir_core.assets"],
      package_dir={"cir_core.assets": "assets"})
