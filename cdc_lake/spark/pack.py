"""The Python environment the executors need, packed into one archive for ``spark.archives``.

On a cluster, decoding and Kafka range reads run in Python workers on the executors, which import
``cdc_lake`` and its dependencies; the executors' hosts do not have them.  :func:`pack_environment`
writes what the running interpreter has installed for cdc-lake (its own packages and every
distribution its requirements pull in, evaluated for this interpreter) as a virtualenv-shaped tar
archive::

    bin/python -> the base interpreter of this environment (an absolute link)
    pyvenv.cfg
    lib/pythonX.Y/site-packages/...

Spark unpacks it in each executor's working directory (``spark.archives: ARCHIVE#environment``)
and ``spark.pyspark.python: ./environment/bin/python`` runs it.  Like venv-pack, the archive holds
no interpreter: the executors need the same Python at the same path (the same image or OS
packages).  Unlike venv-pack it packs an editable install (the project's source packages are
copied) and leaves out what is not cdc-lake's: development tools, and pyspark and py4j, which the
executors take from their own Spark installation (``$SPARK_HOME/python/lib``, shipped by
spark-submit on YARN), which must be the driver's Spark version anyway.
"""

from __future__ import annotations

import io
import json
import site
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cdc_lake.exceptions import ConfigError

PROJECT = "cdc-lake"
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j"})
"""Distributions the executors' Spark installation provides (left out of the archive)."""

ENVIRONMENT_NAME = "environment"
"""The directory name Spark unpacks the archive to (the ``#fragment`` of ``spark.archives``)."""

_SKIPPED_DIRS = frozenset({"__pycache__"})


@dataclass(frozen=True)
class PackedEnvironment:
    """What :func:`pack_environment` wrote: the archive, the distributions in it and its size."""

    path: Path
    distributions: tuple[str, ...]
    files: int
    bytes: int

    def spark_conf(self, uri: str | None = None) -> dict[str, str]:
        """The ``spark.conf`` entries that ship this archive (at ``uri``, default its path) to executors."""
        location = uri or self.path.resolve().as_uri()
        return {
            "spark.archives": f"{location}#{ENVIRONMENT_NAME}",
            "spark.pyspark.python": f"./{ENVIRONMENT_NAME}/bin/python",
        }


def runtime_distributions(root: str = PROJECT) -> list[metadata.Distribution]:
    """``root`` and every distribution its requirements pull in here, without pyspark and py4j.

    Requirements are evaluated with their environment markers for this interpreter, with the
    extras a requirement names (``confluent-kafka[avro]``); ``root``'s own extras are not followed.
    """
    found: dict[str, metadata.Distribution] = {}
    visited: set[tuple[str, str]] = set()
    pending: list[tuple[str, str, str]] = [(root, "", PROJECT)]
    while pending:
        name, extra, wanted_by = pending.pop()
        key = canonicalize_name(name)
        if key in PROVIDED_BY_SPARK or (key, extra) in visited:
            continue
        visited.add((key, extra))
        try:
            dist = found.get(key) or _installed(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(
                f"cannot pack the Python environment: '{name}' (needed by {wanted_by}) is not installed "
                f"in {sys.prefix}"
            ) from None
        found[key] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                pending.append((requirement.name, "", dist.metadata["Name"]))
                pending.extend((requirement.name, e, dist.metadata["Name"]) for e in requirement.extras)
    return sorted(found.values(), key=lambda d: canonicalize_name(d.metadata["Name"]))


def _installed(name: str) -> metadata.Distribution:
    """``name`` as installed in this interpreter's site directories, before whatever else sys.path
    shows: ``pip wheel .`` leaves ``cdc_lake.egg-info`` in a checkout, which ``python -m cdc_lake`` run
    there finds first, with the file list of the day it was built."""
    sites = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    for dist in metadata.distributions(name=name, path=sites):
        return dist
    return metadata.distribution(name)


def _editable(dist: metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    return text is not None and bool(json.loads(text).get("dir_info", {}).get("editable"))


def _tree(top: Path, arcname: PurePosixPath) -> Iterator[tuple[Path, PurePosixPath]]:
    if top.is_file():
        yield top, arcname
        return
    for path in sorted(top.rglob("*")):
        relative = path.relative_to(top)
        if path.is_file() and not _SKIPPED_DIRS.intersection(relative.parts):
            yield path, arcname / PurePosixPath(*relative.parts)


def _files(dist: metadata.Distribution, site: PurePosixPath) -> Iterator[tuple[Path, PurePosixPath]]:
    """(file on disk, name in the archive) for everything ``dist`` installed into site-packages."""
    editable = _editable(dist)
    for entry in dist.files or []:
        parts = PurePosixPath(entry).parts
        if not parts or parts[0] == ".." or _SKIPPED_DIRS.intersection(parts):
            continue  # console scripts live in bin/ and point at this interpreter: not packed
        if editable and ".dist-info" not in parts[0]:
            continue  # the editable finder and .pth point at the source tree: its packages are copied below
        source = Path(str(dist.locate_file(entry)))
        if source.is_file():
            yield source, site / PurePosixPath(*parts)
    if editable:
        for top in (dist.read_text("top_level.txt") or "").split():
            spec = find_spec(top)
            if spec is None:
                name = dist.metadata["Name"]
                raise ConfigError(f"cannot pack the Python environment: '{top}' of {name} is not importable")
            if spec.submodule_search_locations:
                yield from _tree(Path(next(iter(spec.submodule_search_locations))), site / top)
            elif spec.origin:
                yield Path(spec.origin), site / Path(spec.origin).name


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    archive.addfile(info, io.BytesIO(data))


def _open_archive(output: Path) -> tarfile.TarFile:
    # Spark unpacks .tar.gz with the system's tar; a plain .tar goes through Hadoop's Java untar,
    # which refuses bin/python's absolute link ("would create entry outside of ...").
    if output.name.endswith((".tar.gz", ".tgz")):
        return tarfile.open(output, "w:gz", compresslevel=6)
    raise ConfigError(
        f"cannot pack the Python environment to {output}: name it .tar.gz or .tgz (Spark unpacks "
        "a plain .tar or a .zip with Java, which refuses bin/python's link to the interpreter)"
    )


def pack_environment(output: Path) -> PackedEnvironment:
    """Write the executors' Python environment to ``output``, a gzip-compressed tar archive."""
    distributions = runtime_distributions()
    output.parent.mkdir(parents=True, exist_ok=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = PurePosixPath("lib", version, "site-packages")
    base = Path(getattr(sys, "_base_executable", sys.executable))
    files = 0
    with _open_archive(output) as archive:
        for command, target in (("python", str(base)), ("python3", "python"), (version, "python")):
            link = tarfile.TarInfo(f"bin/{command}")
            link.type = tarfile.SYMTYPE
            link.linkname = target
            link.mode = 0o777
            archive.addfile(link)
        release = ".".join(map(str, sys.version_info[:3]))
        cfg = f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {release}\n"
        _add_bytes(archive, "pyvenv.cfg", cfg.encode())
        seen: set[PurePosixPath] = set()
        for dist in distributions:
            for source, name in _files(dist, site):
                if name not in seen:
                    seen.add(name)
                    archive.add(source, arcname=str(name), recursive=False)
                    files += 1
    return PackedEnvironment(
        output, tuple(d.metadata["Name"] for d in distributions), files, output.stat().st_size
    )
