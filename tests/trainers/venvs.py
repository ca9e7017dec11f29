"""One virtual environment per trainer, with that trainer's own pinned release, built once and cached.

A trainer's venv is named by a hash of everything that decides its contents (the Python version and
the install steps below), under `${XDG_CACHE_HOME:-~/.cache}/whileai-datasets/trainer-venvs/` (or
`WAI_TRAINER_VENVS`), so a machine that has built it once reuses it, and a change to a pin builds a
new one. A build goes into a temporary folder beside the final one and is renamed when every step
has passed, so an interrupted build never leaves a venv that looks complete. The venvs never hold
this package: the tests run the trainers' code on what a published repo gives them.

Two ways a trainer goes in. axolotl and ms-swift with `--no-deps`: their full dependency lists pull
GPU-only or huge packages that cannot install on a CPU machine without CUDA (axolotl: bitsandbytes,
triton, xformers, liger-kernel, torchao, flash-linear-attention, plus gradio, modal, lm_eval, wandb,
s3fs, ...; ms-swift: modelscope, evalscope, ...); their specs install the trainer itself with
`--no-deps`, then the trainer's own pins of the libraries its data path imports (transformers,
datasets, tokenizers, ...), then the few small modules its import chain needs (each with the reason).
There torch is `torch==2.13.0`, the CPU build on this machine's disk. LLaMA-Factory as a user
installs it, with every dependency it declares (`with_deps`): its data code imports torchaudio, so
torch is 2.9.1 with torchvision 0.24.1 and torchaudio 2.9 (no torchaudio exists for torch 2.13.0;
this set installs and loads here, a CUDA build that runs on the CPU, about 8 GB), installed first
in their own steps (`first`), as this machine's notes give them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: torch is pinned everywhere: an unpinned torch resolves to a multi-GB CUDA build.
TORCH = "torch==2.13.0"
BUILD_TIMEOUT = 1800.0  # one pip step; a cold build of the largest venv takes a few minutes


@dataclass(frozen=True)
class TrainerEnv:
    """A trainer's venv: the trainer installed without its dependencies, then what its data path imports."""

    name: str
    trainer: str  # the trainer's own release, installed with --no-deps
    requirements: tuple[str, ...]  # installed with their dependencies, resolved together
    extra_no_deps: tuple[str, ...] = ()  # small modules its imports need, installed without their dependencies
    why: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    first: tuple[tuple[str, ...], ...] = ()  # pip installs before everything else, one step each
    with_deps: bool = False  # the trainer with its own dependencies, resolved with `requirements` in one step

    def steps(self) -> list[list[str]]:
        """The pip argument lists, in order: what the hash covers."""
        if self.with_deps:
            return [*(["install", *step] for step in self.first), ["install", self.trainer, *self.requirements]]
        steps = [["install", *self.requirements], ["install", "--no-deps", self.trainer]]
        if self.extra_no_deps:
            steps.append(["install", "--no-deps", *self.extra_no_deps])
        return steps

    def digest(self) -> str:
        spec = {"python": list(sys.version_info[:3]), "steps": self.steps()}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def cache_root() -> Path:
    if os.environ.get("WAI_TRAINER_VENVS"):
        return Path(os.environ["WAI_TRAINER_VENVS"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "whileai-datasets" / "trainer-venvs"


@dataclass(frozen=True)
class BuiltEnv:
    """A ready venv: its interpreter, whether this call built it, how long that took, what pip froze."""

    python: Path
    built: bool
    seconds: float
    freeze: tuple[str, ...]


def ensure(env: TrainerEnv, *, root: Path | None = None) -> BuiltEnv:
    """The venv for `env`, built first if no complete one with the same hash exists."""
    root = root or cache_root()
    final = root / f"{env.name}-{env.digest()}"
    started = time.monotonic()
    built = False
    if not (final / "complete.json").exists():
        _build(env, final)
        built = True
    record = json.loads((final / "complete.json").read_text())
    return BuiltEnv(final / "bin" / "python", built, time.monotonic() - started if built else record["seconds"],
                    tuple(record["freeze"]))


def _build(env: TrainerEnv, final: Path) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f"{final.name}.building-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    started = time.monotonic()
    try:
        _run([sys.executable, "-m", "venv", str(temporary)], env.name)
        python = temporary / "bin" / "python"
        for step in env.steps():
            _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *step[1:]], env.name)
        freeze = _run([str(python), "-m", "pip", "freeze", "--all"], env.name).splitlines()
        record = {"name": env.name, "steps": env.steps(), "seconds": round(time.monotonic() - started, 1),
                  "freeze": freeze, "why": env.why}
        (temporary / "complete.json").write_text(json.dumps(record, indent=1))
        try:
            temporary.rename(final)  # atomic; fails if another process finished the same build first
        except OSError:
            if not (final / "complete.json").exists():
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _run(command: list[str], name: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"building the {name} trainer venv: {' '.join(command[-6:])} failed "
                           f"({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


AXOLOTL = TrainerEnv(
    name="axolotl",
    trainer="axolotl==0.19.0",
    # axolotl 0.19.0's own pins of what prompt_strategies.chat_template and axolotl.datasets import
    requirements=(TORCH, "transformers==5.16.1", "tokenizers==0.23.1", "datasets==4.8.4", "huggingface_hub==1.17.0",
                  "accelerate==1.13.0", "pydantic==2.12.5", "PyYAML==6.0.3", "packaging==26.0", "addict", "colorama"),
    why={"accelerate": "axolotl.utils.distributed imports PartialState (pulled in by axolotl.utils.logging)",
         "pydantic": "the dataset entry is validated by axolotl's SFTDataset schema",
         "addict": "axolotl.utils.dict.DictDefault", "colorama": "axolotl.prompters imports Fore"},
)

#: torch for LLaMA-Factory, whose data code imports torchaudio: torchaudio 2.9.1 pins torch==2.9.1
LLAMAFACTORY_TORCH = ("torch==2.9.1", "torchvision==0.24.1", "torchaudio==2.9.*")

LLAMAFACTORY = TrainerEnv(
    name="llamafactory",
    trainer="llamafactory==0.9.5",
    # installed as its README says (`pip install llamafactory`), with all it declares; the libraries its
    # data path runs on are pinned to the newest releases inside its own ranges
    requirements=(*LLAMAFACTORY_TORCH, "transformers==5.6.0", "datasets==4.0.0", "trl==0.24.0",
                  "accelerate==1.11.0", "peft==0.18.1"),
    first=(LLAMAFACTORY_TORCH[:2], (LLAMAFACTORY_TORCH[0], LLAMAFACTORY_TORCH[2])),
    with_deps=True,
    why={"torch==2.9.1": "llamafactory.data imports torchaudio at module level (data/mm_plugin.py); no torchaudio "
                         "exists for torch 2.13.0; torch 2.9.1 with torchaudio 2.9.1 installs and loads here",
         "datasets==4.0.0": "LLaMA-Factory's pin is datasets<=4.0.0: the sharegpt config must load on it",
         "transformers==5.6.0, trl==0.24.0, accelerate==1.11.0, peft==0.18.1": "the top of LLaMA-Factory's ranges"},
)

MS_SWIFT = TrainerEnv(
    name="ms-swift",
    trainer="ms-swift==4.6.0",
    # inside ms-swift 4.6.0's ranges (transformers<5.20, datasets<4.8.5, trl<1.0, peft<0.21): the newest of each
    requirements=(TORCH, "transformers==5.19.0", "datasets==4.8.4", "trl==0.29.1", "peft==0.20.0", "modelscope",
                  "pillow", "addict", "attrdict", "dacite", "json-repair", "simplejson", "sortedcontainers",
                  "binpacking", "zstandard"),
    why={"modelscope": "swift.utils.torch_utils imports modelscope.hub (its hub and cache helpers)",
         "pillow": "swift.template.templates import PIL.Image",
         "trl, peft": "swift.utils patches trl; swift.tuners imports peft",
         "addict, attrdict, dacite, json-repair, simplejson, sortedcontainers, binpacking, zstandard":
             "imported at module level on the path from swift.dataset / swift.template"},
)

TRAINERS = {env.name: env for env in (AXOLOTL, LLAMAFACTORY, MS_SWIFT)}
