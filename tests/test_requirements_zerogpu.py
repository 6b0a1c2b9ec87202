"""requirements-zerogpu.txt is requirements.txt with a torch/torchvision pair ZeroGPU runs
(docs/SPACES.md, step 7): everything else stays in step with requirements.txt."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZEROGPU_TORCH = ("2.1.0", "2.1.1", "2.1.2", "2.2.0", "2.2.2", "2.4.0", "2.5.1", "2.6.0", "2.7.1", "2.8.0")
TORCHVISION_FOR = {"2.8.0": "0.23.0", "2.7.1": "0.22.1", "2.6.0": "0.21.0", "2.5.1": "0.20.1", "2.4.0": "0.19.0"}


def pins(name: str) -> dict[str, str]:
    out = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            pkg = line.split("=")[0].split(">")[0].split("<")[0].strip().lower()
            out[pkg] = line
    return out


def test_zerogpu_variant_differs_only_in_torch():
    main, zero = pins("requirements.txt"), pins("requirements-zerogpu.txt")
    assert {k: v for k, v in main.items() if k not in ("torch", "torchvision")} == \
           {k: v for k, v in zero.items() if k not in ("torch", "torchvision")}
    torch = zero["torch"].split("==")[1]
    assert torch in ZEROGPU_TORCH and zero["torchvision"] == f"torchvision=={TORCHVISION_FOR[torch]}"
