# pragma version 0.4.3
"""
@title Text rendering for token metadata
@license MIT
@notice Hexadecimal ids and addresses, CIDv1 in base32 (the form IPFS
        shows), and the base64 JSON data URL returned by `tokenURI`. Only views
        call these, so they cost no transaction gas.
        https://www.rfc-editor.org/rfc/rfc2397 (data URLs)
        https://www.rfc-editor.org/rfc/rfc4648 (base32, base64)
"""

# @dev RFC 4648 base32 alphabet in lower case, as multibase prefix "b" uses it.
_BASE32: constant(Bytes[32]) = b"abcdefghijklmnopqrstuvwxyz234567"
_HEX: constant(Bytes[16]) = b"0123456789abcdef"

# @dev Multicodec of the two content kinds an IPFS node stores files as.
CODEC_RAW: constant(uint256) = 85
CODEC_DAG_PB: constant(uint256) = 112
# @dev A binary CIDv1 with a sha2-256 multihash: version, codec, hash code,
#      digest length, then the 32-byte digest.
CID_LENGTH: constant(uint256) = 36

# @dev Longest JSON document a `tokenURI` may encode: a multiple of 24 bytes,
#      which base64 turns into whole 32-character words.
MAX_JSON: constant(uint256) = 1200
_B64_WORDS: constant(uint256) = MAX_JSON // 24
# @dev Base64 keeps `#`, `%`, quotes and spaces of the JSON out of the URL:
#      every data-URL reader decodes it, whereas raw JSON is cut at `#`.
_DATA_URL_PREFIX: constant(String[29]) = "data:application/json;base64,"
MAX_URI: constant(uint256) = 29 + 32 * _B64_WORDS


@internal
@pure
def _char(alphabet: Bytes[32], index: uint256) -> uint256:
    return convert(slice(alphabet, index, 1), uint256)


@internal
@pure
def _hex_words(x: uint256) -> (uint256, uint256):
    """
    @dev The 64 lower-case hex digits of `x` as two 32-character words.
    """
    high: uint256 = 0
    low: uint256 = 0
    for i: uint256 in range(32):
        high = (high << 8) | self._char(_HEX, (x >> (252 - 4 * i)) & 15)
        low = (low << 8) | self._char(_HEX, (x >> (124 - 4 * i)) & 15)
    return high, low


@internal
@pure
def _hex32(x: bytes32) -> String[66]:
    """
    @dev `x` as "0x" followed by 64 hex digits.
    """
    high: uint256 = 0
    low: uint256 = 0
    high, low = self._hex_words(convert(x, uint256))
    return convert(concat(b"0x", convert(high, bytes32), convert(low, bytes32)), String[66])


@internal
@pure
def _hex_address(x: address) -> String[42]:
    """
    @dev `x` as "0x" followed by 40 lower-case hex digits.
    """
    return concat("0x", slice(self._hex32(convert(convert(x, uint256), bytes32)), 26, 40))


@internal
@pure
def _cid(codec: uint256, digest: bytes32) -> String[59]:
    """
    @dev The CIDv1 (sha2-256) of `digest` with `codec`, multibase base32:
         "b" then 58 characters encoding the 36 binary bytes.
    """
    prefix: uint256 = (1 << 24) | (codec << 16) | (18 << 8) | 32
    d: uint256 = convert(digest, uint256)
    # 36 bytes = 288 bits, padded with two zero bits to 58 groups of five.
    tail: uint256 = (d & ((1 << 253) - 1)) << 2
    words: uint256[2] = [0, 0]
    for k: uint256 in range(58):
        group: uint256 = 0
        if k < 6:
            group = (prefix >> (27 - 5 * k)) & 31
        elif k == 6:
            group = ((prefix & 3) << 3) | (d >> 253)
        else:
            group = (tail >> (250 - 5 * (k - 7))) & 31
        position: uint256 = k + 1
        words[position // 32] |= self._char(_BASE32, group) << (8 * (31 - position % 32))
    words[0] |= convert(convert(b"b", bytes1), uint256) << 248
    return convert(
        slice(concat(convert(words[0], bytes32), convert(words[1], bytes32)), 0, 59), String[59]
    )


@internal
@pure
def _cid_bytes(codec: uint256, digest: bytes32) -> Bytes[CID_LENGTH]:
    """
    @dev The binary CIDv1 (sha2-256) of `digest` with `codec`.
    """
    prefix: uint256 = (1 << 24) | (codec << 16) | (18 << 8) | 32
    return concat(slice(convert(prefix, bytes32), 28, 4), digest)


@internal
@pure
def _parse_cid(cid: Bytes[CID_LENGTH]) -> (bool, bytes32):
    """
    @dev Validates a binary CIDv1 (raw or dag-pb, sha2-256) and returns
         (is dag-pb, digest). Reverts with the expected shape otherwise.
    """
    assert len(cid) == CID_LENGTH, \
        "CID: expected a 36-byte binary CIDv1 (raw or dag-pb codec, sha2-256 multihash)"
    head: bytes4 = convert(slice(cid, 0, 4), bytes4)
    assert head == 0x01551220 or head == 0x01701220, \
        "CID: only CIDv1 with the raw (0x55) or dag-pb (0x70) codec and a sha2-256 digest"
    return head == 0x01701220, extract32(cid, 4)


@internal
@pure
def _base64_char(sextet: uint256) -> uint256:
    # @dev RFC 4648 alphabet by ranges: A-Z, a-z, 0-9, "+", "/".
    if sextet < 26:
        return 65 + sextet
    if sextet < 52:
        return 71 + sextet
    if sextet < 62:
        return sextet - 4
    if sextet == 62:
        return 43
    return 47


@internal
@pure
def _json_data_url(document: String[MAX_JSON]) -> String[MAX_URI]:
    """
    @dev `data:application/json;base64,` followed by `document` in padded
         base64. Each 24 input bytes become one 32-character word; the words
         are laid out contiguously by `abi_encode` and sliced to length.
    """
    data: Bytes[MAX_JSON] = convert(document, Bytes[MAX_JSON])
    n: uint256 = len(data)
    # Zero tail so that `extract32` may read a whole word at every 24-byte step.
    padded: Bytes[MAX_JSON + 32] = concat(data, empty(bytes32))
    meaningful: uint256 = (4 * n + 2) // 3
    total: uint256 = (n + 2) // 3 * 4
    words: DynArray[uint256, _B64_WORDS] = []
    for w: uint256 in range(_B64_WORDS):
        if 32 * w >= total:
            break
        chunk: uint256 = convert(extract32(padded, 24 * w), uint256) >> 64
        word: uint256 = 0
        for k: uint256 in range(32):
            char: uint256 = 61  # "=": padding after the last meaningful character
            if 32 * w + k < meaningful:
                char = self._base64_char((chunk >> (186 - 6 * k)) & 63)
            word = (word << 8) | char
        words.append(word)
    # abi_encode lays the words out after their 32-byte count.
    encoded: Bytes[32 + 32 * _B64_WORDS] = slice(abi_encode(words, ensure_tuple=False), 32, total)
    return concat(_DATA_URL_PREFIX, convert(encoded, String[32 * _B64_WORDS]))
