"""A damaged or hostile model.tar.gz at each site that unpacks one (shared/model_archives.py): the site's own error,
nothing written. The archives are fuzz/corpus/model_archive's finding-* inputs."""

from __future__ import annotations

import gzip
import tarfile
from io import BytesIO
from pathlib import Path

import pytest
from sagemaker_tfs.packaging import PackagingError, check
from sagemaker_tfs.runtime_api.errors import RuntimeApiError
from sagemaker_tfs.runtime_api.target_models import UNPACKED, TargetModels
from sagemaker_tfs.transform import containers
from sagemaker_tfs.transform.containers import ContainerError
from sagemaker_tfs.transform.outcomes import FailureKind


def _tar(*members: tuple[str, bytes]) -> bytes:
    out = BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, BytesIO(content))
    return out.getvalue()


def _sparse(extended: bool = False) -> bytes:
    """An old GNU sparse member: 4 bytes of data at offset 0 of a file of 4 GiB; `extended`: its header announces
    an extension block, which is missing."""
    info = tarfile.TarInfo("sparse")
    info.size = 4
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    header[156:157] = tarfile.GNUTYPE_SPARSE
    header[386:410] = b"%011o\0%011o\0" % (0, 4)
    header[483:495] = b"%011o\0" % (4 << 30)
    header[482] = extended
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header) if extended else bytes(header) + b"data".ljust(512, b"\0") + bytes(1024)


def _hard_link(name: str, target: str) -> bytes:
    out = BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        link = tarfile.TarInfo(name)
        link.type, link.linkname = tarfile.LNKTYPE, target
        tar.addfile(link)
    return out.getvalue()


TRUNCATED = gzip.compress(_tar(("1/saved_model.pb", b"x" * 4000)), mtime=0)[:-40]
FILE_UNDER_A_FILE = _tar(("a", b"file"), ("a/b", b"under a file"))
SPARSE_MESSAGE = "member 'sparse' is a sparse file; store the file itself"


def _unpack_target(tmp_path: Path, archive: bytes) -> str:
    models = TargetModels.__new__(TargetModels)  # _unpacked needs the model root only
    models.root = tmp_path
    (tmp_path / "m.tar.gz").write_bytes(archive)
    with pytest.raises(RuntimeApiError) as error:
        models._unpacked(tmp_path / "m.tar.gz", "m.tar.gz")
    assert (error.value.status, error.value.code) == (400, "ValidationError")
    assert list((tmp_path / UNPACKED).iterdir()) == []  # the partial unpack is gone
    return error.value.message


def _unpack_job_model(tmp_path: Path, archive: bytes) -> str:
    (tmp_path / "model.tar.gz").write_bytes(archive)
    with pytest.raises(ContainerError) as error:
        containers._unpack(tmp_path / "model.tar.gz", tmp_path / "model", "s3://b/model.tar.gz")
    assert error.value.kind == FailureKind.CLIENT
    return str(error.value)


def _check(tmp_path: Path, archive: bytes) -> str:
    (tmp_path / "model.tar.gz").write_bytes(archive)
    with pytest.raises(PackagingError) as error:
        check(tmp_path / "model.tar.gz")
    return str(error.value)


def test_a_truncated_gzip_is_each_site_s_error(tmp_path):
    cut = "Compressed file ended before the end-of-stream marker was reached"
    assert _unpack_target(tmp_path, TRUNCATED) == f"cannot unpack TargetModel 'm.tar.gz': {cut}"
    assert _unpack_job_model(tmp_path, TRUNCATED) == f"Unable to unpack the model s3://b/model.tar.gz: {cut}"
    assert _check(tmp_path, TRUNCATED) == f"{tmp_path / 'model.tar.gz'} is not a readable tar archive: {cut}"


def test_a_sparse_member_is_refused_at_each_site(tmp_path):
    assert _unpack_target(tmp_path, _sparse()) == f"cannot unpack TargetModel 'm.tar.gz': {SPARSE_MESSAGE}"
    assert _unpack_job_model(tmp_path, _sparse()) == f"Unable to unpack the model s3://b/model.tar.gz: {SPARSE_MESSAGE}"
    assert not (tmp_path / "model" / "sparse").exists()
    assert _check(tmp_path, _sparse()) == f"{tmp_path / 'model.tar.gz'} is not a readable tar archive: {SPARSE_MESSAGE}"


def test_package_model_check_refuses_a_member_it_cannot_write(tmp_path):
    message = _check(tmp_path, FILE_UNDER_A_FILE)
    assert message.startswith(
        f"{tmp_path / 'model.tar.gz'} is not a readable tar archive: [Errno 20] Not a directory: "
    )
    assert message.endswith("/model/a/b'")


def test_a_hard_link_to_a_member_the_archive_lacks_is_each_site_s_error(tmp_path):
    """tarfile raises KeyError for it (fuzz/corpus/model_archive/finding-hard-link-to-a-missing-member); package-model
    refuses every link before unpacking."""
    archive = _hard_link("hard", "2252")
    missing = "\"linkname '2252' not found\""
    assert _unpack_target(tmp_path, archive) == f"cannot unpack TargetModel 'm.tar.gz': {missing}"
    assert _unpack_job_model(tmp_path, archive) == f"Unable to unpack the model s3://b/model.tar.gz: {missing}"
    assert _check(tmp_path, archive) == "archive member 'hard' is a link; store the file itself"


def test_a_sparse_header_cut_short_is_each_site_s_error(tmp_path):
    """tarfile raises IndexError reading it (fuzz/corpus/model_archive/finding-sparse-header-cut-short)."""
    archive = _sparse(extended=True)
    assert _unpack_target(tmp_path, archive) == "cannot unpack TargetModel 'm.tar.gz': index out of range"
    assert _unpack_job_model(tmp_path, archive) == "Unable to unpack the model s3://b/model.tar.gz: index out of range"
    assert _check(tmp_path, archive) == f"{tmp_path / 'model.tar.gz'} is not a readable tar archive: index out of range"


def test_a_member_size_past_any_file_offset_is_each_site_s_error(tmp_path):
    """tarfile's seek past it raises ValueError (fuzz/corpus/model_archive/finding-member-size-beyond-an-offset)."""
    info = tarfile.TarInfo("big")
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    header[124:136] = b"\xff\xff\xff" + bytes(9)  # GNU base-256: a size of about -2**72
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    archive, offset = bytes(header) + bytes(1024), "cannot fit 'int' into an offset-sized integer"
    assert _unpack_target(tmp_path, archive) == f"cannot unpack TargetModel 'm.tar.gz': {offset}"
    assert _unpack_job_model(tmp_path, archive) == f"Unable to unpack the model s3://b/model.tar.gz: {offset}"
    assert _check(tmp_path, archive) == f"{tmp_path / 'model.tar.gz'} is not a readable tar archive: {offset}"


def test_a_link_that_resolves_to_itself_is_each_site_s_error(tmp_path):
    """A nameless symbolic link to '' sends tarfile's fallback copy round in circles: RecursionError
    (fuzz/corpus/model_archive/finding-link-to-itself); package-model refuses every link before unpacking."""
    out = BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        link = tarfile.TarInfo("")
        link.type = tarfile.SYMTYPE
        tar.addfile(link)
    archive, circles = out.getvalue(), "maximum recursion depth exceeded"  # (" in comparison", or not: where it hits)
    assert _unpack_target(tmp_path, archive).startswith(f"cannot unpack TargetModel 'm.tar.gz': {circles}")
    assert _unpack_job_model(tmp_path, archive).startswith(f"Unable to unpack the model s3://b/model.tar.gz: {circles}")
    assert _check(tmp_path, archive) == "archive member '' is a link; store the file itself"
