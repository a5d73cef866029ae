"""A real S3 API server on the loopback address (moto's standalone server), for
the tests of lsdask on object stores, and the ``storage_options`` that reach it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of an S3 server started for this test session (skipped where
    moto or s3fs is not installed: the ``test`` extra installs both)."""
    pytest.importorskip("s3fs")
    server_module = pytest.importorskip("moto.server")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def s3_options(endpoint: str) -> dict[str, Any]:
    """``storage_options`` for s3fs against the server at ``endpoint``."""
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        "use_listings_cache": False,
    }


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A new, empty bucket's URL (``s3://name``) on the session's server."""
    import boto3

    name = f"lsdask-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=name)
    return f"s3://{name}"


@pytest.fixture(params=["memory", "s3"])
def store(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """(URL, storage_options) of a new, empty location in ``memory://`` and in the
    session's S3 server (a test that S3 adds nothing to narrows it with
    ``@pytest.mark.parametrize("store", ["memory"], indirect=True)``)."""
    name = f"lsdask-{uuid.uuid4().hex[:12]}"
    if request.param == "memory":
        return f"memory://{name}", {}
    bucket = request.getfixturevalue("s3_bucket")
    return f"{bucket}/{name}", s3_options(request.getfixturevalue("s3_endpoint"))
