"""What the harness fetches from the package index: a release's wheel (pip, no dependencies)
and its source distribution (the index's simple API: `pip download` of an sdist would build
its metadata, which for vLLM needs CUDA's toolchain). Both go where the caller caches them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from conformance.core.vllms import wheel_folder
from fixtures.cache import building

PYPI = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


def downloaded_wheel(requirement: str, folder: Path, failure: str) -> Path:
    """The wheel of `requirement` from the package index (no dependencies), downloaded into
    `folder`; else `failure: pip's last line` as a RuntimeError."""
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                          "--only-binary=:all:", requirement, "-d", str(folder)],
                         capture_output=True, text=True)
    wheels = sorted(folder.glob("*.whl"))
    if got.returncode != 0 or not wheels:
        tail = (got.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise RuntimeError(f"{failure}: {tail}")
    return wheels[0]


def index_urls() -> list[str]:
    """The indexes pip reads, its own settings first (PIP_INDEX_URL, pip's configuration),
    then PyPI's."""
    urls = [os.environ.get("PIP_INDEX_URL", "")]
    got = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                         capture_output=True, text=True)
    urls.append(got.stdout.strip() if got.returncode == 0 else "")
    urls.append(PYPI)
    return list(dict.fromkeys(u.rstrip("/") for u in urls if u.startswith("http")))


def downloaded_sdist(project: str, version: str, folder: Path) -> Path:
    """`project`'s source distribution of `version` from the first index that lists it,
    checked against the sha256 the index gives; else a one-line RuntimeError."""
    name = f"{project}-{version}.tar.gz"
    tried = []
    for index in index_urls():
        request = urllib.request.Request(f"{index}/{project}/", headers={"Accept": SIMPLE_JSON})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                listed = json.load(answer).get("files", [])
        except (OSError, ValueError) as error:
            tried.append(f"{index}: {error}")
            continue
        for entry in listed:
            if entry.get("filename") != name:
                continue
            target = folder / name
            digest = hashlib.sha256()
            with urllib.request.urlopen(entry["url"], timeout=600) as got, \
                    open(target, "wb") as out:
                while chunk := got.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            expected = entry.get("hashes", {}).get("sha256")
            if expected and digest.hexdigest() != expected:
                raise RuntimeError(f"{name} from {index}: sha256 {digest.hexdigest()}, the "
                                   f"index says {expected}")
            return target
        tried.append(f"{index}: no {name}")
    raise RuntimeError(f"{project} {version}'s source distribution could not be fetched "
                       f"({'; '.join(tried) or 'no index'})")


def unpack(archive: Path, target: Path, members: str) -> None:
    """The members of a .tar.gz under `members` (a folder inside its top folder), unpacked
    into `target` with the top folder dropped."""
    import tarfile

    with tarfile.open(archive) as tar:
        chosen = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) > 1 and Path(*parts[1:]).as_posix().startswith(members):
                member.name = Path(*parts[1:]).as_posix()
                chosen.append(member)
        tar.extractall(target, chosen, filter="data")
    if not chosen:
        shutil.rmtree(target, ignore_errors=True)
        raise RuntimeError(f"{archive.name} has nothing under {members}")


def unpacked_wheel(version: str) -> Path:
    """vLLM `version`'s wheel from the package index, unpacked into the cache (once)."""
    import zipfile

    target = wheel_folder(version)
    if (target / "vllm" / "__init__.py").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with building(target), tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        if (target / "vllm" / "__init__.py").is_file():  # another process fetched it
            return target
        downloaded = downloaded_wheel(f"vllm=={version}", Path(tmp),
                                      f"vLLM {version} has no build for this machine "
                                      "and its wheel could not be fetched")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(downloaded) as wheel:
            wheel.extractall(unpacked)
        os.replace(unpacked, target)
    return target
