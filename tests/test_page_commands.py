"""Every ``keras-hardneg`` command a user can copy from the README or the site's pages is one
that the heavy tier's new-user run (tests/test_anywhere.py) knows how to run, or one it lists
as needing several machines: checked here in the default suite, so that a new command on a
page fails in seconds rather than after the heavy tier's ten minutes."""

from tests.test_anywhere import NOT_RUN, PLAN, readme_commands


def test_every_page_command_is_planned_or_listed_as_not_run():
    commands = readme_commands()
    assert len(commands) >= 20, commands
    unknown = [c for c in commands if c not in NOT_RUN and c.split(" #")[0] not in PLAN]
    assert not unknown, f"a page command tests/test_anywhere.py does not know: {unknown}"


def test_every_planned_command_is_on_a_page():
    commands = {c.split(" #")[0] for c in readme_commands()}
    stale = [c for c in PLAN if c not in commands]
    assert not stale, f"PLAN names commands no page shows any more: {stale}"
