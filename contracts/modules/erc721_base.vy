# pragma version 0.4.3
"""
@title Shared ERC-721 plumbing for the three MCFL token kinds
@license MIT
@notice Approvals, operators, the ERC-721 receiver check and ERC-165 for
        Trainers, Updates and Models. Ownership itself stays in each contract,
        packed with the data of its tokens, so a mint costs one storage slot.
        https://eips.ethereum.org/EIPS/eip-721
        https://eips.ethereum.org/EIPS/eip-165
@dev snekmate's `erc721` keeps owners in their own mapping (plus enumeration
     arrays), which would cost every proposal and model one or more extra
     storage slots; only this small part is generic enough to share.
"""

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

# @dev Bound of the `data` argument of `safeTransferFrom`.
MAX_DATA: constant(uint256) = 1024


# @dev The approved address of each token, cleared on transfer.
_approved: HashMap[uint256, address]

# @dev Operators an owner allowed to move all its tokens of this kind.
isApprovedForAll: public(HashMap[address, HashMap[address, bool]])


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
@pure
def supportsInterface(interfaceId: bytes4) -> bool:
    """
    @notice ERC-165: True for ERC-165, ERC-721 and ERC-721 metadata.
    @param interfaceId The 4-byte interface identifier.
    @return Whether this contract implements it.
    """
    return interfaceId in [_INTERFACE_ERC165, _INTERFACE_ERC721, _INTERFACE_ERC721_METADATA]


@internal
@view
def _get_approved(token_id: uint256) -> address:
    return self._approved[token_id]


@internal
def _approve(owner: address, spender: address, token_id: uint256):
    assert msg.sender == owner or self.isApprovedForAll[owner][msg.sender], \
        "ERC721: only the owner of the token or its operator may approve"
    self._approved[token_id] = spender
    log Approval(owner=owner, approved=spender, tokenId=token_id)


@internal
def _authorize_transfer(owner: address, sender: address, receiver: address, token_id: uint256):
    """
    @dev Checks a transfer of `token_id` (owned by `owner`) from `sender` to
         `receiver` asked by `msg.sender`, then clears the token's approval.
    """
    assert owner == sender, "ERC721: the sender does not own this token"
    assert receiver != empty(address), "ERC721: cannot transfer to the zero address"
    approved: address = self._approved[token_id]
    assert msg.sender == owner or approved == msg.sender \
        or self.isApprovedForAll[owner][msg.sender], \
        "ERC721: caller is neither the owner, nor approved for this token, nor an operator"
    if approved != empty(address):
        self._approved[token_id] = empty(address)


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
