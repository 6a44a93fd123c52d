"""What the peer client accepts of a response before it writes a byte."""

from __future__ import annotations

import pytest
import requests

from fleetcache.compute.peers import source
from fleetcache.image import ImageMeta

META = ImageMeta(id="a26887c6-c47b-4654-abb5-dfadf7d3f803", size=10,
                 os_hash_algo="sha512", os_hash_value="0" * 128)


def _response(status: int, **headers: str) -> requests.Response:
    resp = requests.Response()
    resp.status_code = status
    resp.headers.update(headers)
    return resp


def test_a_plain_whole_body_ends_at_the_image_size() -> None:
    assert source._check_response(_response(200, **{"Content-Length": "10"}), META, 0) == 10


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_an_encoded_body_is_left_before_requests_inflates_it(encoding: str) -> None:
    resp = _response(200, **{"Content-Length": "10", "Content-Encoding": encoding})
    with pytest.raises(source._Left, match="encoded"):
        source._check_response(resp, META, 0)
