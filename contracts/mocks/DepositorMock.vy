# pragma version 0.4.3
"""
@title Test mock of a trainer contract that refuses native currency
@license MIT
@notice Registers, exits and asks for its deposit back, but has no payable
        default function, so the refund cannot reach it. Not deployed on networks.
"""

interface ITrainers:
    def register() -> uint256: payable
    def exit(): nonpayable
    def withdrawDeposit(): nonpayable

TRAINERS: immutable(address)


@deploy
def __init__(trainers: address):
    """
    @notice Deploy a depositor for the given Trainers contract.
    @param trainers Address of the Trainers contract.
    """
    TRAINERS = trainers


@external
@payable
def register() -> uint256:
    """
    @notice Register this contract, paying the value sent along.
    @return Its trainer id.
    """
    return extcall ITrainers(TRAINERS).register(value=msg.value)


@external
def leave():
    """
    @notice Exit, then ask for the deposit (which this contract cannot receive).
    """
    extcall ITrainers(TRAINERS).exit()
    extcall ITrainers(TRAINERS).withdrawDeposit()
