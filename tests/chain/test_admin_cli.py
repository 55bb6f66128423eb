"""``mcfl-chain admin allow | revoke | show`` against an allowlist devnet; ``admin join``
against an open one."""

from __future__ import annotations

from click.testing import CliRunner

from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.client import ChainClient, Phase
from mcfl_chain.cli import main


def test_admin_admits_revokes_and_shows_the_registration(new_devnet, tmp_path):
    # Prepare: an allowlist network kept by dev account 1, nobody admitted yet
    deployment = new_devnet(registration="allowlist", admin_index=1, min_trainers=3)
    path = deployment.save(tmp_path / "deployment.json")
    keeper, first, second = (dev_account(i).address for i in (1, 2, 3))

    def admin(*args: str):
        runner = CliRunner(mix_stderr=False)
        return runner.invoke(main, ["admin", *args, "--deployment", str(path)])

    # Execute
    outsider = admin("allow", first, "--account-index", "2")
    admitted = admin("allow", first, second, "--account-index", "1")
    trainer_id = ChainClient(deployment, account_index=2).register()
    revoked = admin("revoke", second, "--account-index", "1")
    shown = admin("show", first, second)

    # Assert
    assert outsider.exit_code == 1
    assert f"only the admin {keeper} may change the allowlist" in outsider.stderr
    assert admitted.exit_code == 0, admitted.output
    assert admitted.stdout.splitlines() == [
        f"admitted {first} (one registration)",
        f"admitted {second} (one registration)",
    ]
    assert revoked.exit_code == 0 and revoked.stdout == f"revoked {second}\n"
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[:2] == ["registration: allowlist", f"admin: {keeper}"]
    assert f"max samples: {deployment.max_samples}" in lines
    assert lines[-2:] == [
        f"{first}: admission used, trainer id {trainer_id}",
        f"{second}: admission none, not registered",
    ]


def test_admin_join_puts_a_late_trainer_in_the_next_phase_and_refuses_the_others(
    new_devnet, tmp_path
):
    # Prepare: an open network of two (dev accounts 1 and 2); account 3 registers once
    # round 0 is open (not a member of it), account 4 never does.
    deployment = new_devnet(min_trainers=2)
    path = deployment.save(tmp_path / "deployment.json")
    first, second, late = (ChainClient(deployment, account_index=i) for i in (1, 2, 3))

    def join(index: int):
        runner = CliRunner(mix_stderr=False)
        return runner.invoke(
            main, ["admin", "join", "--deployment", str(path), "--account-index", str(index)]
        )

    # Execute
    first.register()
    before_start = join(1)
    second.register()
    late_id = late.register()
    outsider = join(4)
    member = join(1)
    joined = join(3)
    twice = join(3)
    first.submit_proposals([])
    second.submit_proposals([])
    after = late.status()

    # Assert: one line each; only the late trainer's join was sent, recorded in round 0's
    # PROPOSE phase without counting, and it is a member of the AGGREGATE phase after it.
    assert before_start.exit_code == 1 and "rounds have not started" in before_start.stderr
    assert outsider.exit_code == 1, outsider.output
    assert f"{dev_account(4).address} is not a registered trainer" in outsider.stderr
    assert member.exit_code == 1
    assert "is already a member of round 0's PROPOSE phase" in member.stderr
    assert joined.exit_code == 0, joined.output
    assert joined.stdout.startswith(
        f"trainer {late_id} ({late.address}) joined with a bare vote in round 0's PROPOSE phase"
    )
    assert twice.exit_code == 1 and "already voted in round 0's PROPOSE phase" in twice.stderr
    votes = [
        (e.args["trainerId"], e.args["round"], e.args["phase"], e.args["counted"])
        for e in late.models.events.TrainerVoted.get_logs(from_block=0)
    ]
    assert (late_id, 0, Phase.PROPOSE, False) in votes
    assert sum(1 for v in votes if v[0] == late_id) == 1
    assert (after.round, after.phase) == (0, Phase.AGGREGATE)
    assert after.member and not after.voted
