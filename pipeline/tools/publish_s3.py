"""`python -m pipeline publish --to s3://bucket/prefix`: the built site to S3-compatible object storage.

What changed is read from the manifests: `site/manifest.json` of this build against the
`manifest.json` published under the prefix by the previous run (none: everything is new). Only
new and changed files are uploaded, and only files the previous manifest listed are deleted (never
an object this tool did not publish). The order keeps every published page whole: assets and data
first, then the release's copies under data/releases/<version>/ (with their zip and record), then the
pages (so no page links to an asset or a release zip not yet there), then the deletions, and the
manifest last (an interrupted run is simply run again). A file the previous release had and this one
has not is deleted at once only if it is a page: an asset, a search index part or a data file stays
for one more release and at least KEEP_SECONDS (a page a CDN still serves from its cache may load
it), listed in `manifest.retained.json`; a later publish deletes it. Each object gets its Content-Type and a
Cache-Control: a year and `immutable` for content-hashed names (`style.<hash>.css`), a few minutes
for pages and data files. The URLs a CDN must purge (changed and deleted files) are printed.

The endpoint is any S3-compatible one: `--endpoint-url` or `$AWS_ENDPOINT_URL` (none: AWS itself);
credentials and region come from the usual variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `AWS_PROFILE`, `AWS_DEFAULT_REGION`) through boto3.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import mimetypes
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

MANIFEST = "manifest.json"
IMMUTABLE = "public, max-age=31536000, immutable"
SHORT = "public, max-age=300, must-revalidate"  # pages, data files, sitemap: what an edit changes
NO_CACHE = "no-cache"  # the manifest: always asked anew
HASHED = re.compile(r"\.[0-9a-f]{10}\.[A-Za-z0-9]+$")  # render.asset's content-hashed names
PAGEFIND_HASHED = re.compile(r"^pagefind/(fragment|index)/.+\.pf_")  # Pagefind names these by content

T = TypeVar("T")

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".csv": "text/csv; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".xml": "application/xml",
    ".svg": "image/svg+xml",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".parquet": "application/vnd.apache.parquet",
    ".duckdb": "application/octet-stream",
    ".wasm": "application/wasm",
    ".zip": "application/zip",
}

EXIT_CODES = """exit codes:
  0  published (or nothing to publish)
  1  an internal error (a bug: the traceback says where)
  2  no build to publish (OUT/site/manifest.json missing), a manifest (local or published) that is not
     one of this site, a file it names that is outside OUT/site, a symbolic link or not a file, or a
     --to that is not s3://bucket[/prefix]
  3  the storage refused or could not be reached, or its settings (endpoint URL, region, profile,
     config file) cannot be used (the message says what); run again to finish
  64 a wrong command line"""
SHA256 = re.compile(r"[0-9a-f]{64}")


class PublishError(Exception):
    """A problem the user can fix, with exit code 2 (input) or 3 (the storage or the network)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def content_type(name: str) -> str:
    """The Content-Type of an uploaded file, by its suffix (the site's own types first)."""
    suffix = Path(name).suffix.lower()
    return TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def cache_control(name: str) -> str:
    """The Cache-Control of an uploaded file: no caching for the manifest, for ever for content-hashed
    names, briefly otherwise."""
    if name == MANIFEST:
        return NO_CACHE
    if HASHED.search(Path(name).name) or PAGEFIND_HASHED.search(name):
        return IMMUTABLE
    return SHORT


def manifest_files(data: bytes | str, where: str) -> dict[str, str]:
    """The `files` of a manifest (file -> SHA-256). PublishError (exit 2) for anything else: not JSON,
    not a map of names to hashes, or a name that is not a safe path inside the site (the same check as
    the build's, pipeline.publish.paths), so that no manifest can make publish read or delete elsewhere."""
    from pipeline.publish.paths import UnsafePath, check_relative

    try:
        files = json.loads(data)["files"]
    except (ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
        raise PublishError(f"{where} is not a manifest of this site: {type(exc).__name__}", 2) from None
    if not isinstance(files, dict):
        raise PublishError(f"{where} is not a manifest of this site: its files are not a map", 2)
    for name, digest in files.items():
        try:
            check_relative(name)
        except UnsafePath as exc:
            raise PublishError(f"{where}: {exc}", 2) from None
        if name == MANIFEST or not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise PublishError(f"{where}: {name!r} is not listed with a SHA-256", 2)
    return files


def open_built(site: Path, name: str):
    """The built file OUT/site/NAME, opened for reading without following a symbolic link anywhere on the
    way (pipeline.publish.paths.safe_path, then O_NOFOLLOW); PublishError (exit 2) for a name outside the
    site, a link, or anything but a regular file."""
    import errno
    import os
    import stat

    from pipeline.publish.paths import UnsafePath, safe_path

    try:
        path = safe_path(site, name)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except UnsafePath as exc:
        raise PublishError(str(exc), 2) from None
    except OSError as exc:
        code = 3 if exc.errno in (errno.EACCES, errno.EPERM, errno.EIO) else 2
        raise PublishError(f"{site / name}: {exc.strerror}: build again (python -m pipeline build)", code) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PublishError(f"{site / name} is not a file: build again (python -m pipeline build)", 2)
    return os.fdopen(fd, "rb")


def check_built(site: Path, names: list[str]) -> None:
    """Every one of `names` opened as open_built opens it, before anything is uploaded (the uploads run
    eight at a time, so a bad file met while uploading would not stop the others of its kind); one
    PublishError naming every file that cannot be, with the first one's exit code."""
    problems = []
    for name in names:
        try:
            with open_built(site, name):
                pass
        except PublishError as exc:
            problems.append(exc)
    if problems:
        raise PublishError("\n".join(str(p) for p in problems), problems[0].code)


def parse_target(url: str) -> tuple[str, str]:
    """s3://bucket/prefix -> (bucket, "prefix/") ("" for the bucket's root)."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise PublishError(f"--to {url!r}: expected s3://bucket or s3://bucket/prefix", 2)
    prefix = parts.path.strip("/")
    if any(segment in ("", ".", "..") for segment in prefix.split("/")) and prefix:
        raise PublishError(f"--to {url!r}: the prefix has an empty, '.' or '..' segment", 2)
    return parts.netloc, f"{prefix}/" if prefix else ""


@dataclass
class Plan:
    upload: list[str] = field(default_factory=list)  # in upload order
    delete: list[str] = field(default_factory=list)
    purge: list[str] = field(default_factory=list)  # changed and deleted (new files are not cached yet)
    kept: list[str] = field(default_factory=list)  # gone from this release, kept for cached pages (retain)
    snapshot: tuple[int, int] = (0, 0)  # release files copied to data/releases/<version>/, and deleted
    unreleased: list[str] = field(default_factory=list)  # tables changed since the published release, same version


def order_key(name: str) -> tuple[int, str]:
    """Assets and data first, pages after them, the manifest last."""
    if name == MANIFEST:
        return 3, name
    if name.endswith(".html"):
        return 2, name
    return 1, name


def plan(local: dict[str, str], remote: dict[str, str] | None) -> Plan:
    """What to upload, delete and purge, from this build's manifest and the published one."""
    remote = remote or {}
    changed = [name for name, digest in local.items() if remote.get(name) != digest]
    result = Plan()
    result.upload = sorted(changed, key=order_key)
    result.upload.append(MANIFEST)
    result.delete = sorted(name for name in remote if name not in local and name != MANIFEST)
    result.purge = sorted([name for name in changed if name in remote] + result.delete)
    return result


# --- keeping the previous release's assets for pages a CDN still caches -------------------------------

RETAINED = "manifest.retained.json"  # beside the manifest: what was kept, since when (never listed in it)
# How long a gone asset stays at least, besides one more release: far longer than a page's own cache
# (SHORT, 5 minutes), for a CDN that keeps pages longer than they ask.
KEEP_SECONDS = 7 * 24 * 3600


def retain(todo: Plan, local: dict[str, str], kept_before: dict[str, dict], now: float) -> dict[str, dict]:
    """Hold back the deletions a cached page could miss: of what left this release (todo.delete), pages
    are deleted and everything else is kept; of what an earlier publish kept (`kept_before`: name ->
    {"sha256", "since"} from RETAINED), what is still gone and was kept at least KEEP_SECONDS is deleted
    now, the rest stays. Rewrites todo.delete, todo.purge and todo.kept; returns the new RETAINED entries."""
    gone = todo.delete
    kept = {name: entry for name, entry in kept_before.items() if name not in local}
    delete = [name for name in gone if name.endswith(".html")]
    for name in gone:
        if not name.endswith(".html"):
            kept[name] = kept.get(name) or {"since": now}
    for name in [n for n in kept if n not in gone]:  # kept by an earlier publish: one release has passed
        if now - kept[name]["since"] >= KEEP_SECONDS:
            delete.append(name)
            del kept[name]
    todo.delete = sorted(delete)
    todo.kept = sorted(kept)
    changed = [name for name in todo.purge if name not in gone]
    todo.purge = sorted(changed + todo.delete)
    return dict(sorted(kept.items()))


def read_retained(s3, bucket: str, prefix: str) -> dict[str, dict]:
    """What earlier publishes kept under `prefix` (RETAINED); {} when there is none or it is unreadable."""
    from botocore.exceptions import ClientError

    try:
        body = s3.get_object(Bucket=bucket, Key=prefix + RETAINED)["Body"].read()
        kept = json.loads(body)["kept"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return {}
        raise
    except (ValueError, KeyError, TypeError):
        return {}
    return {str(n): {"since": float(e["since"])} for n, e in kept.items() if isinstance(e, dict) and "since" in e}


def write_retained(s3, bucket: str, prefix: str, kept: dict[str, dict]) -> None:
    """RETAINED: the kept files and when each was first kept (never cached: read anew by the next publish)."""
    body = json.dumps({"kept": kept}, indent=1, sort_keys=True).encode()
    s3.put_object(
        Bucket=bucket, Key=prefix + RETAINED, Body=body, ContentType="application/json", CacheControl=NO_CACHE
    )


# --- releases of the data at stable URLs -----------------------------------------------------------------

RELEASES_PREFIX = "data/releases/"
# In data/releases/<version>/, beside the copies: the SHA-256 of each file of the release as first
# published, written before the first copy; the unreleased-changes warning compares every later build with it.
RELEASE_RECORD = "manifest.json"


def release_version(site: Path) -> str | None:
    """The release this build carries (data/datapackage.json `version`), None before the first release."""
    try:
        return json.loads((site / "data" / "datapackage.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def unreleased_tables(  # noqa: PLR0913
    site: Path,
    local: dict[str, str],
    remote: dict[str, str] | None,
    published: str | None,
    released: dict[str, str] | None = None,
) -> list[str]:
    """The tables whose CSV in this build is not the one of the release it carries: data changed since
    the last release, but no new release was made, so a citation of that version would now fetch other
    data. Compared with the release's own record (`released`: data/releases/<version>/manifest.json, name
    under data/ -> sha256) where there is one, so every later publish of the same version warns too; else
    with the published site (`remote`, its manifest), when that carries the same version (`published`:
    its datapackage.json `version`). [] before the first release."""
    version = release_version(site)
    if version is None:
        return []
    if released is not None:
        against = {f"data/{name}": digest for name, digest in released.items()}
    elif remote is not None and version == published:
        against = remote
    else:
        return []
    package = json.loads((site / "data" / "datapackage.json").read_text(encoding="utf-8"))
    return sorted(
        r["name"]
        for r in package.get("resources", [])
        if against.get(f"data/{r['path']}") != local.get(f"data/{r['path']}")
    )


def read_release_record(s3, bucket: str, prefix: str, version: str | None) -> dict[str, str] | None:
    """What the files of release `version` were when it was first published (RELEASE_RECORD: name under
    data/ -> sha256); None when there is no release, no record (a release stored before records were
    kept) or an unreadable one."""
    from botocore.exceptions import ClientError

    if version is None:
        return None
    try:
        body = s3.get_object(Bucket=bucket, Key=f"{prefix}{RELEASES_PREFIX}{version}/{RELEASE_RECORD}")["Body"].read()
        files = json.loads(body)["files"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return None
        raise
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(files, dict):
        return None
    return {str(name): str(digest) for name, digest in files.items()}


def read_remote_version(s3, bucket: str, prefix: str) -> str | None:
    """The release the published site carries (its data/datapackage.json `version`); None if there is none."""
    from botocore.exceptions import ClientError

    try:
        body = s3.get_object(Bucket=bucket, Key=prefix + "data/datapackage.json")["Body"].read()
        version = json.loads(body).get("version")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return None
        raise
    except (ValueError, AttributeError):
        return None
    return version if isinstance(version, str) else None


def snapshot_plan(  # noqa: PLR0913
    local: dict[str, str], version: str, stored: dict[str, float], retention, now: float
) -> tuple[list[str], list[str]]:
    """What to copy to data/releases/<version>/ (this release's data files, once) and which stored release
    files to delete: those of a version past the newest `retention.releases` whose files were first stored
    more than `retention.days` ago (releases.Retention). `stored` maps the names under data/releases/ the
    bucket holds to when each was stored (seconds since the epoch)."""
    from pipeline.publish.releases import SEMVER

    copy = sorted(
        name
        for name in local
        if name.startswith("data/")
        and not name.startswith(RELEASES_PREFIX)
        and f"{RELEASES_PREFIX}{version}/{name.removeprefix('data/')}" not in stored
    )

    def version_of(name: str) -> str:
        return name.removeprefix(RELEASES_PREFIX).split("/", 1)[0]

    first_stored: dict[str, float] = {}
    for name, when in stored.items():
        first_stored[version_of(name)] = min(when, first_stored.get(version_of(name), when))
    numbered = sorted(
        (v for v in {*first_stored, version} if SEMVER.match(v)), key=lambda v: tuple(int(n) for n in v.split("."))
    )
    newest = set(numbered[-retention.releases :])
    young = {v for v, when in first_stored.items() if now - when <= retention.days * 86400}
    drop = sorted(
        n for n in stored if SEMVER.match(v := version_of(n)) and v not in newest and v not in young and v != version
    )
    return copy, drop


def release_zip(  # noqa: PLR0913
    site: Path, local: dict[str, str], version: str, target, released: dict[str, str] | None = None
) -> None:
    """Write the zip of this release's data files (releases.write_zip) into the binary file `target`, each
    read from the build like every upload, a piece at a time; only those its record lists (`released`),
    if it has one."""
    from pipeline.publish.releases import write_zip

    files = {}
    for name in local:
        if name.startswith("data/") and not name.startswith(RELEASES_PREFIX):
            if released is not None and name.removeprefix("data/") not in released:
                continue
            files[name.removeprefix("data/")] = lambda name=name: open_built(site, name)
    with open_built(site, "data/datapackage.json") as f:
        package = json.loads(f.read())
    write_zip(target, files, version, package.get("x_released_on") or time.strftime("%Y-%m-%d"))


@contextlib.contextmanager
def release_zip_file(site: Path, local: dict[str, str], version: str, released: dict[str, str] | None):
    """The release zip (release_zip) in a temporary file, read from its start, removed afterwards: never
    the whole zip in memory."""
    import tempfile

    with tempfile.TemporaryFile(prefix="gpu-finetune-release-") as written:
        release_zip(site, local, version, written, released)
        written.seek(0)
        yield written


def snapshot_release(  # noqa: PLR0913
    s3, bucket: str, prefix: str, site: Path, local: dict[str, str], released: dict[str, str] | None = None
) -> tuple[int, int]:
    """Copy this release's data files (already uploaded) to data/releases/<version>/, server-side, upload
    their zip there (releases.zip_path) once, and drop the releases past the retention (site.toml
    `[releases]`); (files copied or uploaded, files deleted). Nothing before the first release. The first
    snapshot of a version writes its record (RELEASE_RECORD) first; once there is one (`released`), only
    the files it lists are copied (an interrupted snapshot completed), never a file added since."""
    from pipeline.publish.releases import retention, zip_path

    version = release_version(site)
    if version is None:
        return 0, 0
    stored = {
        o["Key"].removeprefix(prefix): o["LastModified"].timestamp()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + RELEASES_PREFIX)
        for o in page.get("Contents", [])
    }
    copy, drop = snapshot_plan(local, version, stored, retention(), time.time())
    folder = f"{RELEASES_PREFIX}{version}/"
    if released is not None:
        copy = [name for name in copy if name.removeprefix("data/") in released]
    recorded = released is None and not any(name.startswith(folder) for name in stored)  # the first snapshot
    if recorded:
        files = {name.removeprefix("data/"): local[name] for name in copy}
        s3.put_object(
            Bucket=bucket,
            Key=prefix + folder + RELEASE_RECORD,
            Body=(json.dumps({"version": version, "files": files}, indent=1, sort_keys=True) + "\n").encode(),
            ContentType="application/json",
            CacheControl=IMMUTABLE,
        )
    for name in copy:
        s3.copy_object(
            Bucket=bucket,
            Key=f"{prefix}{RELEASES_PREFIX}{version}/{name.removeprefix('data/')}",
            CopySource={"Bucket": bucket, "Key": prefix + name},
            MetadataDirective="REPLACE",
            ContentType=content_type(name),
            CacheControl=IMMUTABLE,  # a release's files never change
            # The copy's own checksum: a copy of a multipart upload would otherwise keep the source's
            # composite one, which a reader that validates checksums (boto3) refuses.
            ChecksumAlgorithm="CRC32",
        )
    archive = zip_path(version)
    # The zip holds the release as recorded: none from a build whose data are no longer the release's.
    unchanged = released is None or all(local.get(f"data/{n}") == digest for n, digest in released.items())
    zipped = archive not in stored and unchanged
    if zipped:
        with release_zip_file(site, local, version, released) as written:
            s3.upload_fileobj(
                written,
                bucket,
                prefix + archive,
                ExtraArgs={"ContentType": "application/zip", "CacheControl": IMMUTABLE},
            )
    for start in range(0, len(drop), 1000):
        chunk = drop[start : start + 1000]
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": prefix + n} for n in chunk], "Quiet": True})
    return len(copy) + zipped + recorded, len(drop)


def purge_urls(names: list[str], base_url: str) -> list[str]:
    """Each purged file's URL; an index.html also as its folder's URL (how pages link to it)."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    urls = []
    for name in names:
        urls.append(base + name)
        if name == "index.html" or name.endswith("/index.html"):
            urls.append(base + name.removesuffix("index.html"))
    return urls


def client(endpoint_url: str | None):
    """A boto3 S3 client (at `endpoint_url` when given, with retries); PublishError (exit 3) without boto3."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise PublishError(
            "publishing to S3 needs boto3: pip install 'gpu-finetune-reference[s3]' (or boto3)", 3
        ) from exc
    from botocore.exceptions import BotoCoreError

    try:
        # A connection for each upload thread and each of its transfer's parts (boto3 sends a large file in
        # up to 10 parts at once).
        config = Config(
            retries={"max_attempts": 5, "mode": "standard"},
            s3={"addressing_style": "path"},
            max_pool_connections=UPLOAD_THREADS * 10,
        )
        return boto3.client("s3", endpoint_url=endpoint_url or None, config=config)
    except (BotoCoreError, ValueError, TypeError, LookupError) as exc:  # endpoint, region, profile, config file
        raise PublishError(f"the storage settings cannot be used: {exc}", 3) from None


def read_remote_manifest(s3, bucket: str, prefix: str) -> dict[str, str] | None:
    """The manifest of what the bucket holds under `prefix` (file -> hash); None when there is none yet."""
    from botocore.exceptions import ClientError

    try:
        body = s3.get_object(Bucket=bucket, Key=prefix + MANIFEST)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return None
        raise
    where = f"s3://{bucket}/{prefix}{MANIFEST} (refusing to guess what to delete)"
    return manifest_files(body, where)


def publish(  # noqa: PLR0913
    out: Path, target: str, endpoint_url: str | None = None, base_url: str = "/", dry_run: bool = False, say=print
) -> Plan:
    """Publish OUT/site to `target`; returns the plan carried out."""
    bucket, prefix = parse_target(target)
    site = Path(out) / "site"
    try:
        with open_built(site, MANIFEST) as f:
            data = f.read()
    except PublishError as exc:
        raise PublishError(
            f"{exc}; {site / MANIFEST} is missing or unreadable: build first (python -m pipeline build)", 2
        ) from None
    local = manifest_files(data, str(site / MANIFEST))
    s3 = client(endpoint_url)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        remote = read_remote_manifest(s3, bucket, prefix)
        todo = plan(local, remote)
        released = read_release_record(s3, bucket, prefix, release_version(site))
        todo.unreleased = unreleased_tables(site, local, remote, read_remote_version(s3, bucket, prefix), released)
        kept = retain(todo, local, read_retained(s3, bucket, prefix), time.time())
        say(f"{target}: {len(todo.upload) - 1} to upload, {len(todo.delete)} to delete, {len(local)} in the build")
        if dry_run:
            return todo
        check_built(site, todo.upload)  # nothing is written to the store from a site with a bad file
        # Every name this publish may leave behind is listed before the manifest moves on (run again: deleted).
        write_retained(s3, bucket, prefix, kept | {n: {"since": 0.0} for n in todo.delete if n not in local})
        # The release's copies, zip and record go up after the data they copy and before the first page (the
        # manifest at least) that links its zip.
        todo.snapshot = upload_in_order(
            s3, bucket, prefix, site, todo.upload, lambda: snapshot_release(s3, bucket, prefix, site, local, released)
        )
        # The manifest went last above; deletions come after the pages that stopped linking to them.
        for start in range(0, len(todo.delete), 1000):
            chunk = todo.delete[start : start + 1000]
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": prefix + n} for n in chunk], "Quiet": True})
        write_retained(s3, bucket, prefix, kept)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise PublishError(f"{target}: the storage refused: {error.get('Code')}: {error.get('Message')}", 3) from exc
    except (BotoCoreError, OSError, ValueError) as exc:
        raise PublishError(f"{target}: {exc}", 3) from exc
    return todo


# Files uploaded at once within one kind (order_key's: assets and data, then pages, then the manifest).
# A store answers each request in tens of milliseconds, so a site sent a file at a time waits on the
# network: 1,900 files at 10^6 server_fit rows, 360 with the real catalog. boto3's clients may be
# shared between threads.
UPLOAD_THREADS = 8


def upload_in_order(  # noqa: PLR0913
    s3, bucket: str, prefix: str, site: Path, names: list[str], before_pages: Callable[[], T]
) -> T:
    """Upload `names` (a plan's, in order_key's order) kind by kind, UPLOAD_THREADS at a time within a
    kind, each kind once every file of the kinds before it is up; `before_pages()` runs when the first
    page (or the manifest) is next, with everything before it up, and its result is returned. After a
    failed upload no file of a later kind is sent (the uploads begun finish), and its error is raised."""
    from concurrent.futures import ThreadPoolExecutor

    def upload(name: str) -> None:
        with open_built(site, name) as f:
            s3.upload_fileobj(
                f,
                bucket,
                prefix + name,
                ExtraArgs={"ContentType": content_type(name), "CacheControl": cache_control(name)},
            )

    kinds = [(kind, list(group)) for kind, group in itertools.groupby(names, key=lambda n: order_key(n)[0])]
    first_page = next(i for i, (kind, _) in enumerate(kinds) if kind > 1)
    with ThreadPoolExecutor(UPLOAD_THREADS, thread_name_prefix="upload") as pool:
        for i, (_, group) in enumerate(kinds):
            if i == first_page:
                made = before_pages()
            futures = [pool.submit(upload, name) for name in group]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    return made


def add_parser(commands, formatter, help_text: str) -> None:
    """`publish`: its options (`help_text` is the command's line in `--help`, kept by the CLI)."""
    import os

    p = commands.add_parser(
        "publish",
        help=help_text,
        description="Publish OUT/site to S3-compatible object storage.\n\n" + __doc__.split("\n\n", 1)[1],
        epilog=EXIT_CODES,
        formatter_class=formatter,
    )
    p.add_argument("--to", required=True, metavar="s3://BUCKET/PREFIX", help="where to publish")
    p.add_argument("--out", type=Path, default=Path("output"), help="the build to publish (default: output)")
    p.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL"),
        help="the S3-compatible endpoint, e.g. https://storage.example.org (default: $AWS_ENDPOINT_URL, else AWS)",
    )
    p.add_argument(
        "--base-url",
        type=base_url_option,
        help="the site's public URL, for the list of URLs to purge (default: $SITE_BASE_URL or /)",
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be uploaded and deleted; change nothing")


def base_url_option(text: str) -> str:
    """--base-url, checked as the build checks it (an http(s) address or a path): a wrong one exits 64."""
    import argparse

    from pipeline.render.site_links import check_base_url

    try:
        return check_base_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args) -> int:
    """`python -m pipeline publish`: upload the build (or list what would change with --dry-run); the exit code."""
    if args.base_url is None:  # $SITE_BASE_URL, checked like the option: a wrong one is a setting (exit 3)
        import os

        from pipeline.render.site_links import check_base_url

        try:
            args.base_url = check_base_url(os.environ.get("SITE_BASE_URL") or "/")
        except ValueError as exc:
            print(f"publish: SITE_BASE_URL: {exc}", file=sys.stderr)
            return 3
    try:
        todo = publish(args.out, args.to, args.endpoint_url, args.base_url, dry_run=args.dry_run)
    except PublishError as exc:
        print(f"publish: {exc}", file=sys.stderr)
        return exc.code
    if todo.unreleased:
        from pipeline.messages import message

        version = release_version(Path(args.out) / "site")
        print(
            "publish: " + message("publish.unreleased", version=version, tables=", ".join(todo.unreleased)),
            file=sys.stderr,
        )
    if args.dry_run:
        for name in todo.upload:
            print(f"upload {name}")
        for name in todo.delete:
            print(f"delete {name}")
        for name in todo.kept:
            print(f"keep {name}")
        return 0
    urls = purge_urls(todo.purge, args.base_url)
    print(f"published: {len(todo.upload) - 1} uploaded, {len(todo.delete)} deleted; {len(urls)} URL(s) to purge:")
    for url in urls:
        print(url)
    print_kept(todo.kept)
    if any(todo.snapshot):
        copied, dropped = todo.snapshot
        print(f"release files: {copied} copied to {RELEASES_PREFIX}<version>/, {dropped} of old releases deleted")
    return 0


def print_kept(kept: list[str]) -> None:
    """The files kept for cached pages of an earlier release: not to purge, deleted by a later publish."""
    if kept:
        days = KEEP_SECONDS // 86400
        print(f"kept, not purged: {len(kept)} file(s) of an earlier release that cached pages may still load;")
        print(f"deleted by the first publish at least one release and {days} days after they left the site:")
        for name in kept:
            print(f"  {name}")
