# pragma version 0.4.3
"""
@title Test mock of an ERC-721 receiving contract
@license MIT
@notice Answers `onERC721Received` with its selector when `accept` is set, or a
        wrong value otherwise, to test the safe transfers. Not deployed on networks.
"""

accept: public(bool)


@deploy
def __init__(accept: bool):
    """
    @notice Deploy a receiver that accepts tokens or not.
    @param accept Whether to answer with the right selector.
    """
    self.accept = accept


@external
def onERC721Received(operator: address, sender: address, tokenId: uint256,
                     data: Bytes[1024]) -> bytes4:
    """
    @notice ERC-721 receiver hook.
    @param operator Who called the transfer.
    @param sender Previous holder.
    @param tokenId The token.
    @param data Extra data of the transfer.
    @return The hook's selector when accepting, zero bytes otherwise.
    """
    if self.accept:
        return method_id("onERC721Received(address,address,uint256,bytes)", output_type=bytes4)
    return 0x00000000
