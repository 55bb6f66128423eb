"""``mcfl-chain admin allow | revoke | show`` against an allowlist devnet."""

from __future__ import annotations

from click.testing import CliRunner

from mcfl_chain.chain._tx import dev_account
from mcfl_chain.chain.client import ChainClient
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
