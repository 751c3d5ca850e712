"""model.tar.gz extraction, at each of its three sites: `package-model check` (packaging.check), a multi-model
TargetModel archive (runtime_api/target_models.TargetModels._unpacked) and a local Batch Transform's model
(transform/containers.prepare_model).

The first byte picks the site (its low two bits, modulo 3), whether the harness gzips the archive (0x04) and
whether it first rewrites the checksum of every tar header it walks to (0x08: mutated headers get read, not
refused); the rest is the archive. Oracle: the site's own error only (PackagingError; ValidationError 400;
ContainerError ClientError), and whatever was unpacked stays in the target folder: every path in it resolves inside
it, no link leads out (symbolic, or hard to a file elsewhere), no device or pipe, no file larger than BOUND; a
sentinel folder and the archive beside it are untouched, and nothing else appears next to the target. Everything
lives in one temporary folder of this process (in /dev/shm when there is one).
"""

import atexit
import gzip
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

from sagemaker_tfs import packaging
from sagemaker_tfs.runtime_api.errors import RuntimeApiError
from sagemaker_tfs.runtime_api.target_models import UNPACKED, TargetModels
from sagemaker_tfs.transform import containers
from sagemaker_tfs.transform.containers import ContainerError
from sagemaker_tfs.transform.outcomes import FailureKind

MODULES = (
    "sagemaker_tfs.packaging",
    "sagemaker_tfs.runtime_api.target_models",
    "sagemaker_tfs.transform.containers",
)
MAX_LEN = 8192
BOUND = 64 << 20  # bytes: more than any member of an 8 KiB archive inflates to (gzip: at most ~1,032x)
SENTINEL_TEXT = b"must stay"

_base: Path | None = None


def _folder() -> Path:
    """This process's folder (made once): sentinel/keep, archive.tar.gz, and work/ for each input's target."""
    global _base
    if _base is None:
        shm = Path("/dev/shm")
        _base = Path(tempfile.mkdtemp(prefix="fuzz-model-archive-", dir=shm if shm.is_dir() else None))
        atexit.register(shutil.rmtree, _base, ignore_errors=True)
        (_base / "sentinel").mkdir()
        (_base / "sentinel" / "keep").write_bytes(SENTINEL_TEXT)
    return _base


def _octal(field: bytes) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256
        return int.from_bytes(field[1:], "big")
    digits = field.strip(b" \0").split(b"\0")[0]
    try:
        return int(digits, 8) if digits else 0
    except ValueError:
        return 0


def fix_checksums(archive: bytes) -> bytes:
    """The archive with each header's checksum recomputed (POSIX: the header's bytes summed, the checksum field
    counted as spaces), walking header to header by the size fields."""
    data = bytearray(archive)
    pos = 0
    while pos + 512 <= len(data) and any(data[pos : pos + 512]):
        data[pos + 148 : pos + 156] = b" " * 8
        data[pos + 148 : pos + 156] = b"%06o\0 " % sum(data[pos : pos + 512])
        size = _octal(bytes(data[pos + 124 : pos + 136]))
        if size > len(data):
            break
        pos += 512 + -(-size // 512) * 512
    return bytes(data)


def _check_tree(target: Path) -> None:
    """Everything under `target` stays there."""
    real = os.path.realpath(target)
    inside: dict[tuple[int, int], int] = {}
    links: dict[tuple[int, int], int] = {}
    for folder, dirs, files in os.walk(target):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            assert not (stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) or stat.S_ISFIFO(info.st_mode)), path
            if stat.S_ISLNK(info.st_mode):  # (os.walk enters no linked folder: the rest lies inside)
                resolved = os.path.realpath(path)
                assert resolved == real or resolved.startswith(real + os.sep), (path, resolved)
            if stat.S_ISREG(info.st_mode):
                assert info.st_size <= BOUND, (path, info.st_size)
                key = (info.st_dev, info.st_ino)
                inside[key] = inside.get(key, 0) + 1
                links[key] = info.st_nlink
    assert all(inside[key] == count for key, count in links.items()), "a hard link to a file outside the target"


def _unchanged(base: Path, archive: Path) -> None:
    keep = base / "sentinel" / "keep"
    assert sorted(os.listdir(base)) == ["archive", "sentinel", "work"], os.listdir(base)
    assert os.listdir(base / "sentinel") == ["keep"] and keep.read_bytes() == SENTINEL_TEXT
    assert os.lstat(keep).st_nlink == 1 and os.lstat(archive).st_nlink == 1 and not archive.is_symlink()


def _packaging(archive: Path, work: Path) -> None:
    checked: list[Path] = []
    original = packaging.check_model_dir

    def inspect(model_dir: Path) -> list[str]:
        # check() unpacks into a temporary folder it removes: looked at before its own checks
        assert os.listdir(model_dir.parent) in ([], ["model"]), os.listdir(model_dir.parent)  # [] when empty
        if model_dir.exists():
            _check_tree(model_dir)
        checked.append(model_dir)
        return original(model_dir)

    saved, tempfile.tempdir = tempfile.tempdir, str(work)
    packaging.check_model_dir = inspect
    try:
        packaging.check(archive)
    except packaging.PackagingError as exc:
        assert str(exc), exc
    finally:
        packaging.check_model_dir = original
        tempfile.tempdir = saved
    assert os.listdir(work) == [], os.listdir(work)  # its temporary folder is gone


def _target_models(archive: Path, work: Path) -> None:
    models = TargetModels.__new__(TargetModels)  # _unpacked needs the model root only
    models.root = work / "root"
    models.root.mkdir()
    try:
        folder = models._unpacked(archive, "m.tar.gz")  # noqa: SLF001 (model_for needs a model registry)
    except RuntimeApiError as exc:
        assert (exc.status, exc.code) == (400, "ValidationError"), (exc.status, exc.code)
        assert exc.message.startswith("cannot unpack TargetModel 'm.tar.gz': "), exc.message
        assert os.listdir(models.root / UNPACKED) == [], "a partial unpack was left"
    else:
        assert os.listdir(models.root / UNPACKED) == [folder.name]
        _check_tree(folder)
    assert os.listdir(models.root) == [UNPACKED]


def _no_download(url: str) -> bytes:
    raise AssertionError(f"a local archive is not downloaded: {url}")


def _containers(archive: Path, work: Path) -> None:
    try:
        unpacked = containers.prepare_model(str(archive), work, _no_download)
    except ContainerError as exc:
        assert exc.kind == FailureKind.CLIENT, exc.kind
        assert str(exc).startswith(f"Unable to unpack the model {archive}: "), exc
    else:
        assert unpacked == work / "model"
    assert os.listdir(work) in ([], ["model"]), os.listdir(work)
    if (work / "model").exists():
        _check_tree(work / "model")


SITES: tuple[Callable[[Path, Path], None], ...] = (_packaging, _target_models, _containers)


def _remove(work: Path) -> None:
    for folder, dirs, _files in os.walk(work):
        for name in dirs:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)  # an unpacked folder may hold no write bit
    shutil.rmtree(work)


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], mode: int = 0) -> bytes:
    out = BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, content in members:
            if content is not None:
                info.size = len(content)
            tar.addfile(info, BytesIO(content) if content is not None else None)
    archive = out.getvalue().rstrip(b"\0")  # (tarfile pads to 10 KiB; the end-of-archive blocks are optional)
    return bytes([mode]) + archive + bytes(-len(archive) % 512)


def _info(name: str, kind: bytes = tarfile.REGTYPE, **fields: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def seeds() -> list[bytes]:
    # test/unit/test_packaging.py's and test/multi_model/test_mme_runtime_api.py's archives (a SavedModel at
    # 1/ or ./00000123/, code/inference.py, ../x.txt), and the links, devices and names the filters refuse
    model = [
        (_info("1", tarfile.DIRTYPE, mode=0o755), None),
        (_info("1/saved_model.pb"), b"\x08\x01"),
        (_info("code", tarfile.DIRTYPE), None),
        (_info("code/inference.py"), b"def handler(data, context):\n    return data\n"),
        (_info("code/requirements.txt"), b"# pins\nnumpy=>1\n"),
    ]
    packed = [(_info(".", tarfile.DIRTYPE), None), (_info("./00000123/saved_model.pb"), b"pb")]
    hostile: list[list[tuple[tarfile.TarInfo, bytes | None]]] = [
        [(_info("../x.txt"), b"x")],
        [(_info("/abs.txt"), b"x")],
        [(_info("link", tarfile.SYMTYPE, linkname="../sentinel/keep"), None)],
        [(_info("link", tarfile.SYMTYPE, linkname="/etc"), None), (_info("link/passwd"), b"x")],
        [(_info("inner", tarfile.SYMTYPE, linkname="1"), None), (_info("1/f"), b"y")],
        [(_info("1/f"), b"y"), (_info("hard", tarfile.LNKTYPE, linkname="1/f"), None)],
        [(_info("hard", tarfile.LNKTYPE, linkname="../archive"), None)],
        [(_info("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), None)],
        [(_info("fifo", tarfile.FIFOTYPE), None)],
        [(_info("a"), b"file"), (_info("a/b"), b"under a file")],
        [(_info("d", tarfile.DIRTYPE, mode=0), None), (_info("d/f", mode=0o4777), b"setuid")],
        [(_info("x" * 120 + "/" + "y" * 120), b"long name")],
    ]
    archives = [_tar(model, site) for site in range(3)] + [_tar(packed, 1)]
    archives += [_tar(members, site | 8) for members in hostile for site in range(3)]
    archives += [bytes([site]) + gzip.compress(archive[1:], mtime=0) for site, archive in enumerate(archives[:3])]
    archives.append(bytes([1]) + gzip.compress(archives[0][1:], mtime=0)[:-40])  # truncated
    archives += [bytes([site | 8]) + _sparse() for site in range(3)]
    return archives


def _sparse() -> bytes:
    """An old GNU sparse member: 4 bytes of data at offset 0 of a file of 4 GiB."""
    header = bytearray(_info("sparse", size=4).tobuf(tarfile.GNU_FORMAT))
    header[156:157] = tarfile.GNUTYPE_SPARSE
    header[386:410] = b"%011o\0%011o\0" % (0, 4)
    header[483:495] = b"%011o\0" % (4 << 30)
    return fix_checksums(bytes(header) + b"data".ljust(512, b"\0") + bytes(1024))


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, archive_bytes = data[0], data[1:]
    if mode & 0x08:
        archive_bytes = fix_checksums(archive_bytes)
    if mode & 0x04:
        archive_bytes = gzip.compress(archive_bytes, compresslevel=1, mtime=0)
    base = _folder()
    archive, work = base / "archive", base / "work"
    archive.write_bytes(archive_bytes)
    work.mkdir()
    try:
        SITES[(mode & 3) % 3](archive, work)
        _unchanged(base, archive)
    finally:
        _remove(work)
