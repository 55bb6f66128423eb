# pragma version 0.4.3
"""
@title ERC-721 for the three MCFL token kinds
@license MIT
@notice The one copy of the ERC-721 functions of Trainers, Updates and Models:
        ownership, balances, approvals, operators, transfers with the
        receiver check, ERC-165, name and symbol. Each contract keeps only
        `tokenURI` (its metadata) and what it mints and burns.
        https://eips.ethereum.org/EIPS/eip-721
        https://eips.ethereum.org/EIPS/eip-165
@dev A token's word `_tokens[id]` holds its owner (bits 0-159) and leaves
     bits 160-255 to the collection, which packs its own data there (an
     update's round, parent and samples; a model's round, index and
     popularity), so a mint writes one storage slot. A collection of
     identities (Trainers) allows one token per address: it keeps
     `_tokenOf[holder]` instead of a balance, and a transfer to an address
     that holds one reverts.
     Why not snekmate's `erc721` (AGPL-3.0-only; this project is MIT): it
     keeps owners in their own mapping and enumerates every token, which
     costs each proposal and each new model four more fresh slots (+94,849
     gas a mint, measured: docs/PROTOCOL.md §12, "Why not snekmate's erc721").
"""

from ethereum.ercs import IERC165
from ethereum.ercs import IERC721

implements: IERC165
implements: IERC721


event Transfer:
    sender: indexed(address)
    receiver: indexed(address)
    tokenId: indexed(uint256)

event Approval:
    owner: indexed(address)
    approved: indexed(address)
    tokenId: indexed(uint256)

event ApprovalForAll:
    owner: indexed(address)
    operator: indexed(address)
    approved: bool


# @dev ERC-165 identifiers: ERC-165 itself, ERC-721 and ERC-721 metadata.
_INTERFACE_ERC165: constant(bytes4) = 0x01ffc9a7
_INTERFACE_ERC721: constant(bytes4) = 0x80ac58cd
_INTERFACE_ERC721_METADATA: constant(bytes4) = 0x5b5e139f
_ON_RECEIVED: constant(bytes4) = method_id(
    "onERC721Received(address,address,uint256,bytes)", output_type=bytes4
)

# @dev Bound of the `data` argument of `safeTransferFrom` (IERC721's).
MAX_DATA: constant(uint256) = 1024

# @dev The owner's bits of a token word.
ADDRESS_MASK: constant(uint256) = (1 << 160) - 1


# @dev ERC-721 metadata: the collection's name and symbol.
name: public(immutable(String[32]))
symbol: public(immutable(String[8]))

# @dev Revert reason for an id that names no token, e.g.
#      "Models: no model has this id".
_MISSING: immutable(String[64])

# @dev True for a collection of identities: at most one token per address.
_ONE_PER_HOLDER: immutable(bool)

# @dev Per token: owner (bits 0-159) | the collection's data (160-255); 0: no token.
_tokens: HashMap[uint256, uint256]

# @dev Tokens per owner (collections with several tokens per address).
_balances: HashMap[address, uint256]

# @dev The token of each holder, 0 when none (one-per-holder collections).
_tokenOf: HashMap[address, uint256]

# @dev The approved address of each token, cleared on transfer.
_approved: HashMap[uint256, address]

# @dev Operators an owner allowed to move all its tokens of this kind.
isApprovedForAll: public(HashMap[address, HashMap[address, bool]])


@deploy
def __init__(name_: String[32], symbol_: String[8], missing_reason: String[64],
             one_per_holder: bool):
    """
    @param name_ The collection's name.
    @param symbol_ The collection's symbol.
    @param missing_reason Revert reason for an id that names no token.
    @param one_per_holder True when an address may hold one token at most.
    """
    name = name_
    symbol = symbol_
    _MISSING = missing_reason
    _ONE_PER_HOLDER = one_per_holder


@external
@view
def balanceOf(owner: address) -> uint256:
    """
    @notice Number of tokens of this collection held by `owner`.
    @param owner The address to count for; must not be the zero address.
    @return The count (0 or 1 for trainer tokens).
    """
    assert owner != empty(address), "ERC721: the zero address owns no token"
    if _ONE_PER_HOLDER:
        return convert(self._tokenOf[owner] != 0, uint256)
    return self._balances[owner]


@external
@view
def ownerOf(tokenId: uint256) -> address:
    """
    @notice Holder of token `tokenId`.
    @param tokenId A token id.
    @return The holder; reverts when no token has this id.
    """
    return convert(self._packed(tokenId) & ADDRESS_MASK, address)


@external
@view
def getApproved(tokenId: uint256) -> address:
    """
    @notice The address approved to move token `tokenId`.
    @param tokenId A token id that exists.
    @return The approved address, or the zero address.
    """
    self._packed(tokenId)
    return self._approved[tokenId]


@external
@payable
def approve(spender: address, tokenId: uint256):
    """
    @notice Approve `spender` to move token `tokenId`.
    @dev Payable as IERC721 declares it; these tokens take no payment.
    @param spender The address to approve (zero address: revoke).
    @param tokenId A token owned by the caller or one of its operators.
    """
    assert msg.value == 0, "ERC721: this call takes no payment"
    owner: address = convert(self._packed(tokenId) & ADDRESS_MASK, address)
    assert msg.sender == owner or self.isApprovedForAll[owner][msg.sender], \
        "ERC721: only the owner of the token or its operator may approve"
    self._approved[tokenId] = spender
    log Approval(owner=owner, approved=spender, tokenId=tokenId)


@external
def setApprovalForAll(operator: address, approved: bool):
    """
    @notice Allow or forbid `operator` to move every token of the caller.
    @param operator The address to allow or forbid.
    @param approved True to allow, False to revoke.
    """
    assert operator != msg.sender, "ERC721: an owner cannot make itself its own operator"
    self.isApprovedForAll[msg.sender][operator] = approved
    log ApprovalForAll(owner=msg.sender, operator=operator, approved=approved)


@external
@payable
def transferFrom(sender: address, receiver: address, tokenId: uint256):
    """
    @notice Move token `tokenId` from `sender` to `receiver`. A trainer token
            moves only to an address without one (key rotation); an update or
            model keeps its place in the protocol whoever holds it.
    @dev Payable as IERC721 declares it; these tokens take no payment.
    @param sender Current holder.
    @param receiver New holder.
    @param tokenId The token id.
    """
    assert msg.value == 0, "ERC721: this call takes no payment"
    self._transfer(sender, receiver, tokenId)


@external
@payable
def safeTransferFrom(sender: address, receiver: address, tokenId: uint256,
                     data: Bytes[MAX_DATA] = b""):
    """
    @notice `transferFrom`, then check that a contract receiver accepts ERC-721 tokens.
    @dev Payable as IERC721 declares it; these tokens take no payment.
    @param sender Current holder.
    @param receiver New holder.
    @param tokenId The token id.
    @param data Passed to the receiver's `onERC721Received`.
    """
    assert msg.value == 0, "ERC721: this call takes no payment"
    self._transfer(sender, receiver, tokenId)
    self._check_receiver(sender, receiver, tokenId, data)


@external
@view
def supportsInterface(interfaceId: bytes4) -> bool:
    """
    @notice ERC-165: True for ERC-165, ERC-721 and ERC-721 metadata.
    @param interfaceId The 4-byte interface identifier.
    @return Whether this contract implements it.
    """
    return interfaceId in [_INTERFACE_ERC165, _INTERFACE_ERC721, _INTERFACE_ERC721_METADATA]


@internal
@view
def _packed(token_id: uint256) -> uint256:
    """
    @dev The word of token `token_id`; reverts with the collection's reason
         when no token has this id.
    """
    packed: uint256 = self._tokens[token_id]
    assert packed != 0, _MISSING
    return packed


@internal
def _transfer(sender: address, receiver: address, token_id: uint256):
    """
    @dev Checks a transfer of `token_id` from `sender` to `receiver` asked by
         `msg.sender`, then moves it and clears its approval.
    """
    packed: uint256 = self._packed(token_id)
    owner: address = convert(packed & ADDRESS_MASK, address)
    assert owner == sender, "ERC721: the sender does not own this token"
    assert receiver != empty(address), "ERC721: cannot transfer to the zero address"
    approved: address = self._approved[token_id]
    assert msg.sender == owner or approved == msg.sender \
        or self.isApprovedForAll[owner][msg.sender], \
        "ERC721: caller is neither the owner, nor approved for this token, nor an operator"
    if approved != empty(address):
        self._approved[token_id] = empty(address)
    if _ONE_PER_HOLDER:
        assert self._tokenOf[receiver] == 0, \
            "ERC721: the receiver already holds a token of this collection (one per address)"
        self._tokenOf[sender] = 0
        self._tokenOf[receiver] = token_id
    else:
        self._balances[sender] -= 1
        self._balances[receiver] += 1
    self._tokens[token_id] = (packed & ~ADDRESS_MASK) | convert(receiver, uint256)
    log Transfer(sender=sender, receiver=receiver, tokenId=token_id)


@internal
def _check_receiver(sender: address, receiver: address, token_id: uint256, data: Bytes[MAX_DATA]):
    """
    @dev ERC-721 safe transfer: a contract receiver must answer
         `onERC721Received` with its selector.
    """
    if not receiver.is_contract:
        return
    success: bool = False
    response: Bytes[32] = b""
    success, response = raw_call(
        receiver,
        abi_encode(msg.sender, sender, token_id, data, method_id=_ON_RECEIVED),
        max_outsize=32,
        revert_on_failure=False,
    )
    assert success and len(response) == 32 \
        and convert(slice(response, 0, 4), bytes4) == _ON_RECEIVED, \
        "ERC721: the receiving contract does not accept ERC-721 tokens"
