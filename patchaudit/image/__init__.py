"""An image read layer by layer from its blobs: never extracted, no daemon, nothing in it run.

`source.py` opens a reference (`oci:DIR[:TAG]`, `oci-archive:FILE[:TAG]`, `docker-archive:FILE[:REF]`)
into its manifest's layers and history; `stream.py` reads one layer's blob as a stream (gzip, zstd or
plain tar), checking its digest and hashing each member on the way; `view.py` stacks the layers with
their whiteouts into the files the image holds and which layer put each there; `verify.py` holds each
distribution found in them to its RECORD and names, for every drifted file, the layer that made it so.
"""

from __future__ import annotations

from patchaudit.errors import PatchAuditError


class ImageError(PatchAuditError):
    """An image that cannot be read as one: a bad reference, manifest, blob or layer member."""


__all__ = ["ImageError"]
