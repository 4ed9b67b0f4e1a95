"""A person linked to their accounts on the channels (``clawd users link NAME
telegram:<userId>``): one person an account, undone by ``unlink`` and by removing the
person; odd accounts refused in one line; on the embedded store and on PostgreSQL."""

from __future__ import annotations

import pytest

from clawd.core.errors import ClawdError
from clawd.frontends.cli import main
from clawd.storage.files.people import FilePeople
from clawd.storage.postgres.people import PgPeople


@pytest.fixture(params=["files", "postgresql"])
def people(request, tmp_path):
    if request.param == "files":
        return FilePeople(tmp_path / "people.json")
    from clawd.storage.postgres import database

    return PgPeople(database(request.getfixturevalue("pg_url")))


def test_an_account_links_to_one_person_and_comes_undone(people):
    people.add("alice", ("alice",))
    people.add("bob", ("bob",))
    assert people.linked("telegram:7007") is None
    alice = people.link("alice", " Telegram:7007 ")
    assert alice.links == ("telegram:7007",)
    assert people.link("alice", "telegram:7007").links == ("telegram:7007",)  # no double
    assert people.linked("telegram:7007").name == "alice"
    assert people.linked("telegram:7007").agents == ("alice",)
    with pytest.raises(ClawdError, match="linked to alice already"):
        people.link("bob", "telegram:7007")
    assert people.linked("telegram:7007").name == "alice"  # unchanged
    assert people.link("alice", "telegram:1").links == ("telegram:1", "telegram:7007")
    assert {p.name: p.links for p in people.all()} == {
        "alice": ("telegram:1", "telegram:7007"), "bob": ()}
    with pytest.raises(ClawdError, match="bob is not linked to telegram:7007"):
        people.unlink("bob", "telegram:7007")
    assert people.unlink("alice", "telegram:7007").links == ("telegram:1",)
    assert people.linked("telegram:7007") is None
    assert people.link("bob", "telegram:7007").links == ("telegram:7007",)
    people.remove("bob")  # the person's links go with them
    assert people.linked("telegram:7007") is None
    assert people.link("alice", "telegram:7007").name == "alice"


@pytest.mark.parametrize("account", [
    "telegram:@ann", "telegram:", "telegram:12a", "telegram:-100500", "slack:U123", "7007",
    "telegram:7007\n", "telegram:1\x00", "telegram:" + "9" * 21, ""])
def test_an_odd_account_is_refused_in_one_line(people, account):
    people.add("alice", ("alice",))
    if account == "telegram:7007\n":  # surrounding whitespace is trimmed: this one is fine
        assert people.link("alice", account).links == ("telegram:7007",)
        return
    with pytest.raises(ClawdError) as caught:
        people.link("alice", account)
    assert "\n" not in str(caught.value) and "telegram:<userId>" in str(caught.value)
    assert people.all()[0].links == ()


def test_linking_someone_who_is_not_there_is_refused(people):
    with pytest.raises(ClawdError, match="no person carol"):
        people.link("carol", "telegram:5")
    with pytest.raises(ClawdError, match="no person carol"):
        people.unlink("carol", "telegram:5")
    assert people.linked("telegram:5") is None


def test_clawd_users_link_list_and_unlink(isolated_home, capsys):
    assert main(["users", "add", "alice"]) == 0
    capsys.readouterr()
    assert main(["users", "link", "alice", "telegram:7007"]) == 0
    assert "linked alice to telegram:7007" in capsys.readouterr().out
    assert main(["users", "list"]) == 0
    assert "linked telegram:7007" in capsys.readouterr().out
    assert main(["users", "link", "alice", "telegram:@alice"]) == 1
    assert "telegram:<userId>" in capsys.readouterr().err
    assert main(["users", "unlink", "alice", "telegram:7007"]) == 0
    assert "unlinked alice from telegram:7007" in capsys.readouterr().out
    assert FilePeople(isolated_home / ".clawd" / "people.json").linked("telegram:7007") is None
