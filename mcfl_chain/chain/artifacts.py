"""Compile the Vyper contracts to ABI and bytecode with vyper's Python API.

The same vyper 0.4.3 package ape-vyper uses compiles ``contracts/``; results are cached
by a hash of every source file and the compiler version, so the devnet and tests deploy
with plain web3.py and pay the compile time once.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from dataclasses import dataclass
from pathlib import Path

from mcfl_chain._utils.process import project_root

CONTRACT_NAMES = ("Trainers", "Models", "Updates")


@dataclass(frozen=True)
class Artifact:
    """A compiled contract: its ABI, deployment bytecode and runtime bytecode (0x-hex).

    The code a node holds for a deployed contract is the runtime bytecode followed by
    the contract's immutable values (Vyper appends them), so it starts with
    ``runtime``.
    """

    name: str
    abi: list[dict]
    bytecode: str
    runtime: str


_CACHE_FORMAT = "v2"
"""Bumped when :class:`Artifact` changes, so that older cache files are not read."""
_read: dict[Path, dict[str, Artifact]] = {}
"""The artifacts read or compiled so far in this process, by cache path (which names
the sources' hash): a host builds a hundred workers, and each kept its own parse of the
ABIs (15 MB a host)."""


def contracts_dir() -> Path:
    """Folder holding ``Trainers.vy``, ``Models.vy`` and ``Updates.vy``."""
    folder = Path(os.environ.get("MCFL_CONTRACTS_DIR", project_root() / "contracts"))
    if not (folder / "Models.vy").is_file():
        raise FileNotFoundError(
            f"no Vyper contracts in {folder}: run from a source checkout of "
            f"mcfl-chain or set MCFL_CONTRACTS_DIR to its contracts/ folder"
        )
    return folder


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "mcfl-chain" / "artifacts"


def sources_hash(folder: Path) -> str:
    """sha256 over the compiler version and every ``.vy``/``.vyi`` file below ``folder``.

    The version comes from the installed package's metadata: importing vyper for it
    would cost every worker and deployment 0.3 s of CPU for a cache lookup."""
    digest = hashlib.sha256(importlib.metadata.version("vyper").encode())
    for path in sorted(p for p in folder.rglob("*") if p.suffix in (".vy", ".vyi")):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _compile(folder: Path) -> dict[str, Artifact]:
    from vyper.compiler import compile_from_file_input
    from vyper.compiler.input_bundle import FilesystemInputBundle

    bundle = FilesystemInputBundle([folder])
    compiled = {}
    for name in CONTRACT_NAMES:
        file_input = bundle.load_file(folder / f"{name}.vy")
        out = compile_from_file_input(
            file_input, input_bundle=bundle, output_formats=["abi", "bytecode", "bytecode_runtime"]
        )
        compiled[name] = Artifact(
            name=name, abi=out["abi"], bytecode=out["bytecode"], runtime=out["bytecode_runtime"]
        )
    return compiled


def load_artifacts(folder: Path | None = None) -> dict[str, Artifact]:
    """ABI and deployment bytecode of the three contracts, compiled on first use.

    Parameters
    ----------
    folder
        The contracts folder; by default ``contracts/`` of this checkout.

    Returns
    -------
    dict[str, Artifact]
        Keyed by "Trainers", "Models", "Updates".
    """
    folder = folder or contracts_dir()
    cache = _cache_dir() / f"{sources_hash(folder)}-{_CACHE_FORMAT}.json"
    read = _read.get(cache)
    if read is not None:
        return dict(read)
    if cache.is_file():
        data = json.loads(cache.read_text())
        read = _read[cache] = {name: Artifact(**data[name]) for name in CONTRACT_NAMES}
        return dict(read)
    compiled = _compile(folder)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({n: a.__dict__ for n, a in compiled.items()}))
    tmp.replace(cache)
    _read[cache] = compiled
    return dict(compiled)
