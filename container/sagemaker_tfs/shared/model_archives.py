"""Unpacking a model.tar.gz, wherever it happens (package-model check, a multi-model TargetModel, a local Batch
Transform's model): one member filter and one list of what a damaged archive raises."""

from __future__ import annotations

import lzma
import tarfile
import zlib

# What tarfile raises for a damaged or hostile archive, not only TarError (fuzz/corpus/model_archive's findings): a
# gzip, bzip2 or xz stream cut short or corrupt past the first header raises the decompressor's error (EOFError,
# zlib.error, LZMAError, or an OSError such as gzip's BadGzipFile), as a member that cannot be written (a file where
# a folder must be) does; a hard link to a member the archive lacks raises KeyError, one to itself RecursionError,
# a sparse header cut short IndexError, a member size past any file offset ValueError (OverflowError in other seeks).
UNPACK_ERRORS = (
    tarfile.TarError,
    OSError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    KeyError,
    RecursionError,
    IndexError,
    ValueError,
    OverflowError,
)


class SparseMemberError(tarfile.FilterError):
    def __init__(self, member: tarfile.TarInfo):
        self.tarinfo = member
        super().__init__(f"member {member.name!r} is a sparse file; store the file itself")


def member_filter(member: tarfile.TarInfo, dest_path: str) -> tarfile.TarInfo | None:
    """tarfile's "data" filter (no absolute path, no link leading out, no device file), and no sparse member: its
    header alone sets the size of the file written, whatever the archive holds (a few bytes can make terabytes)."""
    if member.sparse is not None:
        raise SparseMemberError(member)
    return tarfile.data_filter(member, dest_path)
