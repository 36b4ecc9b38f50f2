"""Artifacts: streaming uploads, signed lease-bound publication, verified downloads.

Memory stays at one chunk whatever the size. An upload hashes the bytes (BLAKE3 and SHA-256
in one pass) while it sends them, and the server's answer must name the same digests. Up to
``resumable_above`` bytes go in one ``POST /v1/blobs``; larger files go through a resumable
upload session (``/v1/uploads``), fed only with bytes the server holds durably, so a dropped
connection resumes at the server's offset instead of starting over. A download is written to
a temporary file next to its destination and renamed into place only once both digests
check: no caller ever sees an unverified byte.
"""

from __future__ import annotations

import base64
import io
import os
import secrets
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import httpx

from . import bao, dsse
from ._base import now_rfc3339
from .digests import Digests, Hasher, check_digest
from .errors import (
    IntegrityError,
    InvalidRequest,
    NotFound,
    StaleLease,
    StateConflict,
    Transient,
    WeftError,
)
from .work import Work

READ_CHUNK = 1 << 20
Source = bytes | str | os.PathLike[str] | BinaryIO | Iterable[bytes]


def _file_chunks(file: IO[bytes], hasher: Hasher, limit: int | None = None) -> Iterator[bytes]:
    left = limit
    while left is None or left > 0:
        chunk = file.read(READ_CHUNK if left is None else min(READ_CHUNK, left))
        if not chunk:
            return
        hasher.update(chunk)
        if left is not None:
            left -= len(chunk)
        yield chunk


def _read_into(file: IO[bytes], view: memoryview) -> int:
    """Fills ``view`` from ``file`` as far as the file goes; the byte count."""
    filled = 0
    reader = getattr(file, "readinto", None)
    while filled < len(view):
        if reader is not None:
            count = reader(view[filled:])
        else:
            piece = file.read(len(view) - filled)
            count = len(piece)
            view[filled : filled + count] = piece
        if not count:
            break
        filled += count
    return filled


def _slices(view: memoryview, size: int) -> Iterator[bytes]:
    """``view`` in pieces of ``size`` bytes, without copying (the transport takes any
    bytes-like piece)."""
    for start in range(0, len(view), size):
        yield cast(bytes, view[start : start + size])


def _hashed(chunks: Iterable[bytes], hasher: Hasher) -> Iterator[bytes]:
    for chunk in chunks:
        hasher.update(chunk)
        yield chunk


class Artifacts(Work):
    """The artifact side of the client (mixed into :class:`weft.Client`)."""

    resumable_above: int = 64 << 20
    one_request_up_to: int = 4 << 20
    upload_chunk: int = 8 << 20

    # ---- uploads ---------------------------------------------------------------------------

    def upload(self, source: Source) -> Digests:
        """Streams bytes to the blob store; returns their digests (checked against the
        server's). A path or a seekable file is retried or resumed on a dropped connection; a
        one-shot stream is sent once; ``bytes`` are sent as they are."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            return self._upload_seekable(io.BytesIO(bytes(source)))
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            if path.stat().st_size > self.resumable_above:
                with path.open("rb") as file:
                    return self._upload_resumable(file)
            with path.open("rb") as file:
                return self._upload_seekable(file)
        if isinstance(source, io.IOBase) or hasattr(source, "read"):
            stream = cast(IO[bytes], source)
            if stream.seekable():
                start = stream.tell()
                size = stream.seek(0, os.SEEK_END) - start
                stream.seek(start)
                if size > self.resumable_above:
                    return self._upload_resumable(stream)
                return self._upload_seekable(stream)
            return self._upload_once(iter(lambda: stream.read(READ_CHUNK), b""))
        return self._upload_once(source)

    def _check_receipt(self, answer: dict[str, Any], local: Digests) -> Digests:
        server = Digests(str(answer["blake3"]), str(answer["sha256"]), int(answer["size"]))
        if server != local:
            raise IntegrityError(
                "digest_mismatch",
                f"the server stored {server.blake3} ({server.size} bytes) "
                f"but the bytes sent hash to {local.blake3} ({local.size} bytes)",
            )
        return local

    def _upload_seekable(self, file: IO[bytes]) -> Digests:
        start = file.tell()
        hashers: list[Hasher] = []

        def body() -> Iterator[bytes]:
            file.seek(start)
            hasher = Hasher()
            hashers.append(hasher)
            return _file_chunks(file, hasher)

        answer = self._t.json(
            "POST",
            "/v1/blobs",
            headers={"Content-Type": "application/octet-stream"},
            body=body,
            safe=True,
        )
        return self._check_receipt(answer, hashers[-1].digests())

    def _upload_once(self, chunks: Iterable[bytes]) -> Digests:
        hasher = Hasher()
        stream = _hashed(chunks, hasher)
        answer = self._t.json(
            "POST",
            "/v1/blobs",
            headers={"Content-Type": "application/octet-stream"},
            body=lambda: stream,
            safe=False,
        )
        return self._check_receipt(answer, hasher.digests())

    def _upload_resumable(self, file: IO[bytes]) -> Digests:
        base = file.tell()
        started = self._t.json("POST", "/v1/uploads", safe=False)
        upload_id = str(started["uploadId"])
        path = f"/v1/uploads/{upload_id}"
        try:
            digests = self._send_chunks(file, base, path)
        except BaseException:
            self._cancel_upload(path)
            raise
        try:
            answer = self._t.json(
                "PUT",
                path,
                params={"digest": digests.blake3},
                headers={"Content-Length": "0"},
                safe=True,
            )
        except NotFound:
            # A retried finish whose first answer was lost: the session is gone because the
            # blob was stored. The blob's existence (for its uploader) says so.
            if not self._blob_exists(digests.blake3):
                raise
            return digests
        return self._check_receipt(answer, digests)

    def _send_chunks(self, file: IO[bytes], base: int, path: str) -> Digests:
        """PATCHes the file from the server's durable offset on, feeding the hasher only with
        bytes the server holds; a failure resyncs from ``HEAD`` (``Retry-After`` honoured)
        and the budget of failures is per chunk, so a long upload survives many drops."""
        hasher = Hasher()
        offset = 0
        failures = 0
        # One buffer for the whole upload, read into and sent as slices: allocating a fresh
        # chunk per PATCH fragments the heap (measured: 235 MiB peak for 8 MiB chunks).
        buffer = bytearray(self.upload_chunk)
        view = memoryview(buffer)
        while True:
            file.seek(base + offset)
            length = _read_into(file, view)
            if length == 0:
                return hasher.digests()
            chunk = view[:length]
            headers = {
                "Content-Type": "application/octet-stream",
                "Content-Length": str(length),
                "Content-Range": f"{offset}-{offset + length - 1}",
            }
            try:
                answer = self._t.json(
                    "PATCH", path, headers=headers, body=lambda: _slices(chunk, READ_CHUNK)
                )
                durable = int(answer["offset"])
            except (Transient, StateConflict, InvalidRequest) as error:
                resync = isinstance(error, Transient) or error.code in (
                    "upload_offset_mismatch",
                    "conflict",
                )
                failures += 1
                if not resync or failures > self._t.max_retries:
                    raise
                self._t.sleep(self._t._backoff(failures, error.retry_after))
                durable = self._upload_offset(path)
            if durable < offset or durable > offset + length:
                raise IntegrityError(
                    "upload_offset_mismatch",
                    f"the server holds {durable} bytes of {path}; {offset} were confirmed",
                )
            if durable > offset:
                failures = 0
            hasher.update(chunk[: durable - offset])
            offset = durable

    def _cancel_upload(self, path: str) -> None:
        """Best effort: an abandoned session would count against the upload limit."""
        try:
            self._t.request("DELETE", path, safe=True)
        except WeftError:
            pass

    def _blob_exists(self, blake3_digest: str) -> bool:
        try:
            self._t.request("HEAD", f"/v1/blobs/{blake3_digest}")
            return True
        except NotFound:
            return False

    def _upload_offset(self, path: str) -> int:
        response = self._t.request("HEAD", path)
        value = response.headers.get("upload-offset")
        if value is None:
            raise WeftError("protocol", f"HEAD {path} answered no Upload-Offset")
        return int(value)

    # ---- publication -----------------------------------------------------------------------

    def put(
        self,
        source: Source,
        *,
        work_item: str,
        media_type: str = "application/octet-stream",
        sources: Sequence[str] = (),
        tools: Sequence[dict[str, str]] = (),
        schema: str | None = None,
        classification: str = "internal",
        annotations: dict[str, str] | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """Uploads ``source`` and publishes a signed manifest for it, bound to the Execution
        Lease this Agent holds on ``work_item``. Returns ``{artifact, manifestId, sequence}``."""
        for digest in sources:
            if not check_digest(digest).startswith("blake3:"):
                raise InvalidRequest("invalid_digest", f"a source is named by blake3: ({digest})")
        self.ensure_lease_kept(work_item)
        view = self.work_item(work_item)
        lease = self.lease_of(work_item)
        if lease is None:
            raise StaleLease("stale_lease", f"{self.agent_id} holds no lease on {work_item}")
        small = self._small(source)
        if small is not None:
            digests, content = small
        else:
            digests = self.upload(source)
            self.ensure_lease_kept(work_item)  # a keeper may have lost it during the upload
        notes = dict(annotations or {})
        if name is None and isinstance(source, (str, os.PathLike)):
            name = Path(source).name
        if name is not None:
            notes.setdefault("name", name)
        manifest = {
            "content": {
                "blake3": digests.blake3,
                "sha256": digests.sha256,
                "size": digests.size,
                "mediaType": media_type,
                "schema": schema,
            },
            "producer": {"agentId": self.agent_id, "agentCardVersion": self.card_version},
            "missionId": view["missionId"],
            "groupId": self.session.group_id,
            "workItemId": work_item,
            "execution": {"leaseId": lease.lease_id, "ownershipEpoch": lease.ownership_epoch},
            "sources": list(sources),
            "tools": [dict(tool) for tool in tools],
            "createdAt": now_rfc3339(),
            "classification": classification,
            "retrievalUri": f"{self.base_url}/v1/artifacts/{digests.blake3}/content",
            "annotations": notes,
        }
        if small is not None:
            return self._publish_with_content(manifest, digests, content)
        return self.publish(manifest)

    def _small(self, source: Source) -> tuple[Digests, Callable[[], Iterator[bytes]]] | None:
        """For bytes, or a file of at most ``one_request_up_to`` bytes: its digests (a first
        pass) and a way to read it again, for a publication in one request; else ``None``."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            if len(data) > self.one_request_up_to:
                return None
            hasher = Hasher()
            hasher.update(data)
            return hasher.digests(), lambda: iter((data,))
        if not isinstance(source, (str, os.PathLike)):
            return None
        path = Path(source)
        if path.stat().st_size > self.one_request_up_to:
            return None
        hasher = Hasher()
        with path.open("rb") as file:
            for _ in _file_chunks(file, hasher):
                pass

        def again() -> Iterator[bytes]:
            with path.open("rb") as file:
                yield from iter(lambda: file.read(READ_CHUNK), b"")

        return hasher.digests(), again

    def _publish_with_content(
        self,
        manifest: dict[str, Any],
        digests: Digests,
        content: Callable[[], Iterator[bytes]],
    ) -> dict[str, Any]:
        """``PUT /v1/artifacts/{digest}``: the signed manifest and its bytes in one
        ``multipart/form-data`` request, one transaction (the server hashes the bytes against
        the manifest's digests). Content-addressed, so a retry is safe."""
        envelope = self._signed(dsse.MANIFEST, manifest)
        boundary = "weft-" + secrets.token_hex(16)
        head = (
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="manifest"\r\n'
            "Content-Type: application/json\r\n\r\n"
        ).encode() + envelope + (
            f"\r\n--{boundary}\r\n"
            'Content-Disposition: form-data; name="content"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()

        def body() -> Iterator[bytes]:
            yield head
            yield from content()
            yield tail

        answer: dict[str, Any] = self._t.json(
            "PUT",
            f"/v1/artifacts/{digests.blake3}",
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(len(head) + digests.size + len(tail)),
            },
            body=body,
            safe=True,
        )
        return answer

    def publish(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Signs a manifest and publishes it (``POST /v1/artifacts``)."""
        return self._post_signed("/v1/artifacts", dsse.MANIFEST, manifest)

    # ---- reads -----------------------------------------------------------------------------

    def artifact(self, digest: str) -> dict[str, Any]:
        """``GET /v1/artifacts/{digest}``: digests, size and every manifest."""
        view: dict[str, Any] = self._t.json("GET", f"/v1/artifacts/{check_digest(digest)}")
        return view

    def artifacts(self, **filters: str) -> Iterator[dict[str, Any]]:
        """Every listed artifact matching ``missionId=``, ``workItemId=``, ``producer=``,
        ``mediaType=``, ``name=``…, following the pages."""
        params: dict[str, Any] = dict(filters)
        while True:
            page = self._t.json("GET", "/v1/artifacts", params=params)
            yield from page["items"]
            if page.get("next") is None:
                return
            params["after"] = page["next"]

    def get(self, digest: str, to: str | os.PathLike[str]) -> Digests:
        """Downloads an artifact to ``to``, verifying both digests; the file appears only
        when they hold (otherwise :class:`IntegrityError`, and nothing is left behind)."""
        target = Path(to)
        directory = target.parent if str(target.parent) else Path(".")
        descriptor, temporary = tempfile.mkstemp(prefix=".weft-", dir=directory)
        try:
            with os.fdopen(descriptor, "wb") as out:
                digests = self._download(digest, out)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o666 & ~_umask())
            os.replace(temporary, target)
            return digests
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def get_bytes(self, digest: str, max_size: int = 64 << 20) -> bytes:
        """A small artifact's verified bytes (refused above ``max_size``)."""
        with tempfile.SpooledTemporaryFile(max_size=max_size) as out:
            self._download(digest, out, max_size=max_size)
            out.seek(0)
            return out.read()

    def verified_range(self, digest: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an artifact, with the server's proof checked against its
        ``blake3:`` digest (``bao.py``) before they are returned. The proof is held in memory
        (a little more than the range): ask for ranges you can hold."""
        if not check_digest(digest).startswith("blake3:"):
            raise InvalidRequest("invalid_digest", "a proof's root is the blake3: digest")
        if not 0 <= start < end:
            raise InvalidRequest("invalid_range", f"{start}..{end} is not a byte range")
        headers = {"Accept": bao.MEDIA_TYPE, "Range": f"bytes={start}-{end - 1}"}
        limit = (end - start) + (1 << 20)
        proof = bytearray()
        with self._t.stream(
            "GET", f"/v1/artifacts/{digest}/content", headers=headers
        ) as response:
            proven = response.headers.get("weft-proof-range", "")
            for chunk in response.iter_bytes(READ_CHUNK):
                proof += chunk
                if len(proof) > limit:
                    raise IntegrityError("proof_too_large", f"a proof over {limit} bytes")
        try:
            size = int(proven.rsplit("/", 1)[1])
        except (IndexError, ValueError) as error:
            raise IntegrityError("proof_range", "the answer names no Weft-Proof-Range") from error
        return bao.verify_range(digest, size, start, min(end, size), bytes(proof))

    def _download(self, digest: str, out: IO[bytes], max_size: int | None = None) -> Digests:
        """Streams into ``out`` (from its start) and verifies; a connection cut mid-body
        starts the download again, up to the transport's retries."""
        check_digest(digest)
        attempt = 0
        while True:
            out.seek(0)
            out.truncate()
            try:
                return self._download_once(digest, out, max_size)
            except httpx.TransportError as error:
                attempt += 1
                if attempt > self._t.max_retries:
                    raise Transient("unreachable", f"the download was cut: {error}") from error
                self._t.sleep(self._t._backoff(attempt, None))

    def _download_once(self, digest: str, out: IO[bytes], max_size: int | None) -> Digests:
        hasher = Hasher()
        with self._t.stream("GET", f"/v1/artifacts/{digest}/content") as response:
            etag = response.headers.get("etag", "").strip('"')
            repr_digest = response.headers.get("repr-digest", "")
            identity = response.headers.get("content-encoding", "identity") == "identity"
            # The transport's own reads, not re-chunked: re-chunking copies every byte, and a
            # second hashing thread only fights the reader for the GIL (measured slower).
            for chunk in response.iter_raw() if identity else response.iter_bytes():
                hasher.update(chunk)
                if max_size is not None and hasher.size > max_size:
                    raise IntegrityError("too_large", f"{digest} is over {max_size} bytes")
                out.write(chunk)
        got = hasher.digests()
        if not got.matches(digest):
            raise IntegrityError(
                "integrity_failure", f"asked for {digest}, received bytes hash to {got.blake3}"
            )
        # The other digest, as the server names it: the ETag is the BLAKE3 identity,
        # Repr-Digest the SHA-256 (both must hold, DESIGN §3).
        if etag and etag != got.blake3:
            raise IntegrityError("integrity_failure", f"ETag {etag} is not {got.blake3}")
        served_sha = _repr_sha256(repr_digest)
        if served_sha is not None and served_sha != got.sha256:
            raise IntegrityError("integrity_failure", f"Repr-Digest is not {got.sha256}")
        if not etag or served_sha is None:
            raise IntegrityError("integrity_failure", "the answer named no ETag or Repr-Digest")
        return got


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _repr_sha256(header: str) -> str | None:
    """``sha-256=:<base64>:`` → ``sha256:<hex>``."""
    for member in header.split(","):
        name, _, value = member.strip().partition("=")
        if name == "sha-256" and value.startswith(":") and value.endswith(":"):
            try:
                return "sha256:" + base64.b64decode(value[1:-1], validate=True).hex()
            except ValueError:
                return None
    return None

