"""The object store t1 hands over, read through pyarrow's filesystems.

t1's exec backend sets, in the command's environment:

    T1_STORE_ENDPOINT   the S3 endpoint, a URL (http://127.0.0.1:9000, https://s3.example.com)
    T1_STORE_BUCKET     the bucket
    T1_STORE_PREFIX     a key prefix inside the bucket (may be absent)
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_REGION

or, for a store that is a local directory (objects are files at <dir>/<key>, as the embedded
gateway lays out <data>/s3/<bucket>), T1_STORE_DIR.
"""

from __future__ import annotations

import hashlib
import os
import urllib.parse

import pyarrow.fs as pafs

from .errors import Missing, Refused


CHUNK = 16 << 20  # bytes a download copies at a time


class Store:
    def __init__(self, fs: pafs.FileSystem, root: str):
        self.fs = fs
        self.root = root.rstrip("/")

    @classmethod
    def from_env(cls, env=os.environ) -> "Store":
        if env.get("T1_STORE_DIR"):
            return cls(pafs.LocalFileSystem(), os.path.abspath(env["T1_STORE_DIR"]))
        endpoint, bucket = env.get("T1_STORE_ENDPOINT", ""), env.get("T1_STORE_BUCKET", "")
        if not endpoint or not bucket:
            raise Refused("no object store: set T1_STORE_ENDPOINT and T1_STORE_BUCKET (or T1_STORE_DIR)")
        u = urllib.parse.urlparse(endpoint if "://" in endpoint else "http://" + endpoint)
        fs = pafs.S3FileSystem(
            access_key=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            endpoint_override=u.netloc, scheme=u.scheme or "http",
        )
        root = bucket
        if env.get("T1_STORE_PREFIX"):
            root += "/" + env["T1_STORE_PREFIX"].strip("/")
        return cls(fs, root)

    def path(self, key: str) -> str:
        return f"{self.root}/{key.lstrip('/')}"

    def read(self, key: str) -> bytes:
        try:
            with self.fs.open_input_stream(self.path(key)) as f:
                return f.read()
        except FileNotFoundError:
            raise Missing(f"{key}: no such object in the store") from None

    def read_ref(self, ref: dict) -> bytes:
        """The bytes of a FileRef's object, checked against its size and SHA-256."""
        key = ref["key"]
        data = self.read(key)
        if len(data) != int(ref["bytes"]):
            raise Refused(f"{key}: {len(data)} bytes, the manifest says {ref['bytes']}")
        got = hashlib.sha256(data).hexdigest()
        if got != ref["sha256"]:
            raise Refused(f"{key}: SHA-256 {got}, the manifest says {ref['sha256']}")
        return data

    def list(self, prefix: str) -> list[str]:
        """The keys of the flat directory under prefix (its subdirectories are skipped)."""
        base = self.path(prefix.rstrip("/"))
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(base, recursive=False))
        except FileNotFoundError:
            return []
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.File)

    def download(self, prefix: str, dest: str) -> str:
        """Copies the checkpoint directory under prefix to dest; returns dest."""
        names = self.list(prefix)
        if not names:
            raise Refused(f"checkpoint {prefix}: no objects in the store")
        os.makedirs(dest, exist_ok=True)
        for n in names:
            if n.startswith("."):
                continue
            key = f"{prefix.rstrip('/')}/{n}"
            # Streamed: a real model's weight files are gigabytes each.
            try:
                with self.fs.open_input_stream(self.path(key)) as src, open(os.path.join(dest, n), "wb") as f:
                    while chunk := src.read(CHUNK):
                        f.write(chunk)
            except FileNotFoundError:
                raise Refused(f"{key}: no such object in the store") from None
        return dest
