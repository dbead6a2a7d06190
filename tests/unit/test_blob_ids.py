"""The blob id codec: opaque, URL-safe, versioned, and strict on input."""

import re

import pytest

from quire_api.errors import InvalidArgument
from quire_api.ids import LedgerId
from quire_gateway.blobs import BlobRef, decode_blob_id, encode_blob_id


@pytest.mark.parametrize(
    "ref",
    [
        BlobRef(LedgerId(0, 1), 0, 1),
        BlobRef(LedgerId(2**64 - 1, 2**64 - 1), 2**62, 2**32 - 1),
        BlobRef(LedgerId(5, 2**63 - 1), 123_456, 50),
    ],
)
def test_round_trip_and_url_safe(ref):
    blob_id = encode_blob_id(ref)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", blob_id)
    assert decode_blob_id(blob_id) == ref


@pytest.mark.parametrize(
    "bad",
    ["", "not base64 !", "AAAA", encode_blob_id(BlobRef(LedgerId(0, 1), 0, 1))[:-2], "A" * 39],
)
def test_malformed_ids_are_invalid_argument(bad):
    with pytest.raises(InvalidArgument):
        decode_blob_id(bad)


def test_zero_entries_is_malformed():
    import base64
    import struct

    packed = struct.pack(">BQQQI", 1, 0, 1, 0, 0)
    with pytest.raises(InvalidArgument):
        decode_blob_id(base64.urlsafe_b64encode(packed).decode().rstrip("="))
