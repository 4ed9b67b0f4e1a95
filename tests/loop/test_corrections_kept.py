"""A correction replaces at the time it is told, whatever the model does: the older note
lines are recorded as replaced (and handed out struck through, the new value beside them),
and the person's sentence is kept in today's log unless the model's note holds it."""

from __future__ import annotations

import pytest

from clawd.context.corrections import left_standing, standing
from clawd.core.events import Notice
from clawd.loop.runtime import fixed_models
from clawd.loop.session import Session
from clawd.providers.scripted import Reply, ScriptedProvider, tool
from clawd.workspace.files import read_context_files

from conftest import disk_tool_context, make_runtime

KEY = "agent:main:main"
OLD_LOG = "memory/2026-11-21.md"
OLD_SESSION = "memory/2026-11-21-miso.md"
TODAY = "memory/2026-11-22.md"
SAID = "Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired. Please update your notes."


def setup(tmp_path, provider):
    runtime = make_runtime(tmp_path, provider)
    runtime.files.write(OLD_LOG, "# 2026-11-21\n\n- Miso's vet is Dr. Almeida.\n"
                                 "- Rita's birthday is on 12 March.\n")
    runtime.files.write(OLD_SESSION, "# Session\n\n**user**:\nMy cat is called Miso and her "
                                     "vet is Dr. Almeida at Clinica Boavista.\n")
    return runtime


def test_a_correction_the_model_did_not_note_replaces_the_old_lines(tmp_path):
    provider = ScriptedProvider(["Got it."])
    runtime = setup(tmp_path, provider)
    events = list(Session.open(runtime, KEY).run_turn(SAID))
    memory = runtime.files.read("MEMORY.md")
    assert "## Replaced" in memory
    assert f"- Miso's vet is Dr. Almeida. ({OLD_LOG}#L3) — replaced on 2026-11-22 by: " \
           "Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired." in memory
    assert f"({OLD_SESSION}#L4)" in memory
    assert "Rita" not in memory
    assert memory.startswith("## Replaced\n\n- ")
    assert runtime.files.read(TODAY) == (
        "# 2026-11-22\n\n## Corrections (10:00, the user's correction)\n\n- "
        "Miso's vet is now Dr. Xavier Costa, Dr. Almeida retired.\n")
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert ("your correction: kept in memory/2026-11-22.md; 2 older note lines that said "
            "otherwise now show it as replaced (MEMORY.md, ## Replaced)") in notices
    # the notes themselves are left as written; what is handed out is marked
    assert runtime.files.read(OLD_LOG).count("Dr. Almeida") == 1
    from clawd.tools.memory import memory_tools
    get = next(t for t in memory_tools() if t.spec.name == "memory_get")
    shown = get.run({"path": OLD_LOG}, disk_tool_context(runtime.workspace, runtime.settings))
    assert "~~Miso's vet is Dr. Almeida.~~ [replaced on 2026-11-22 by: Miso's vet is now " \
           "Dr. Xavier Costa" in shown


def test_a_correction_the_model_noted_is_not_kept_twice(tmp_path):
    note = "- Miso's vet is now Dr. Xavier Costa; Dr. Almeida retired.\n"
    provider = ScriptedProvider([Reply("", [tool("write", path=TODAY, content=note,
                                                 append=True)]), "Updated."])
    runtime = setup(tmp_path, provider)
    list(Session.open(runtime, KEY).run_turn(SAID))
    assert runtime.files.read(TODAY).count("Costa") == 1
    assert "replaced on 2026-11-22" in runtime.files.read("MEMORY.md")


def test_told_twice_the_old_line_is_recorded_once(tmp_path):
    provider = ScriptedProvider(["Got it.", "Got it."])
    runtime = setup(tmp_path, provider)
    session = Session.open(runtime, KEY)
    list(session.run_turn(SAID))
    list(session.run_turn(SAID))
    assert runtime.files.read("MEMORY.md").count(f"({OLD_LOG}#L3)") == 1


@pytest.mark.parametrize("said", ["Who is Miso's vet now?", "Miso's vet is Dr. Almeida."])
def test_a_question_or_a_plain_fact_records_nothing(tmp_path, said):
    provider = ScriptedProvider(["Dr. Almeida."])
    runtime = setup(tmp_path, provider)
    list(Session.open(runtime, KEY).run_turn(said))
    assert runtime.files.read("MEMORY.md") is None


def test_a_memory_md_holding_only_the_record_is_not_sent_as_context(tmp_path):
    provider = ScriptedProvider(["Got it."])
    runtime = setup(tmp_path, provider)
    list(Session.open(runtime, KEY).run_turn(SAID))
    names = [f.name for f in read_context_files(runtime.files, include_memory=True,
                                                today=runtime.clock().date(), max_chars=20000)]
    assert "MEMORY.md" not in names


def test_a_line_of_memory_md_is_replaced_in_place(tmp_path):
    """MEMORY.md goes into the context as it is: its old line gives way to the correction,
    and the record keeps the old one."""
    provider = ScriptedProvider(["Got it."])
    runtime = setup(tmp_path, provider)
    runtime.files.write("MEMORY.md", "# MEMORY.md\n\n## People\n\n- Miso's vet is Dr. "
                                     "Almeida (2026-11-21)\n- Rita: sister\n")
    list(Session.open(runtime, KEY).run_turn(SAID))
    memory = runtime.files.read("MEMORY.md")
    assert memory.startswith(
        "# MEMORY.md\n\n## People\n\n- Miso's vet is now Dr. Xavier Costa, Dr. Almeida "
        "retired. (2026-11-22)\n- Rita: sister\n")
    assert "- Miso's vet is Dr. Almeida (2026-11-21) (MEMORY.md#L5) — replaced on " \
           "2026-11-22 by:" in memory


def test_a_move_replaces_where_the_person_lives_and_nothing_else_of_them(tmp_path):
    """Seen with a real 1.5B model: "Correction: Ingrid moved to Bergen last month." left
    MEMORY.md's "Ingrid lives in Tromsø" standing (the opening made "Ingrid" the old value)
    and the next answer said Tromsø. Now that line gives way; Ingrid's other facts stay."""
    provider = ScriptedProvider(["Noted."])
    runtime = setup(tmp_path, provider)
    runtime.files.write("MEMORY.md", "# MEMORY.md\n\n- Ingrid lives in Tromsø\n- Ingrid's "
                                     "birthday is on 2 June\n- Ingrid works as a nurse\n")
    list(Session.open(runtime, KEY).run_turn("Correction: Ingrid moved to Bergen last month."))
    memory = runtime.files.read("MEMORY.md")
    assert memory.startswith("# MEMORY.md\n\n- Correction: Ingrid moved to Bergen last month. "
                             "(2026-11-22)\n- Ingrid's birthday is on 2 June\n"
                             "- Ingrid works as a nurse\n")
    assert "- Ingrid lives in Tromsø (MEMORY.md#L3) — replaced on 2026-11-22" in memory


def test_the_next_request_shows_todays_replaced_line_struck_through(tmp_path):
    """Today's log stays as written (the old line, then the correction under it), and a
    1.5B model still answered with the old line it read first; the context hands the log
    out as ``memory_get`` does: the replaced line struck through, its replacement beside."""
    provider = ScriptedProvider(["Noted.", "Noted.", "In Aveiro."])
    runtime = setup(tmp_path, provider)
    session = Session.open(runtime, KEY)
    runtime.files.write(TODAY, "# 2026-11-22\n\n- Joao lives in Braga and works at Bosch.\n")
    list(session.run_turn("Also, Joao relocated to Aveiro."))
    list(session.run_turn("Where does Joao live?"))
    context = "\n".join(provider.requests[-1].system)
    assert ("- ~~Joao lives in Braga and works at Bosch.~~ [replaced on 2026-11-22 by: "
            "Also, Joao relocated to Aveiro.]") in context
    assert runtime.files.read(TODAY).startswith("# 2026-11-22\n\n- Joao lives in Braga and "
                                                "works at Bosch.\n")  # the log as written


TOLD = "My cat Miso sees Dr. Almeida as her vet. My sister Rita lives in Porto."


@pytest.mark.parametrize("profile", ["strong", "weak"])
def test_the_flush_after_a_correction_does_not_note_the_old_value_again(tmp_path, profile):
    """A 1.5B model's /new flush wrote "My cat Miso sees Dr. Almeida as her vet" again an
    hour after the person said Dr. Almeida retired: the old value was back on disk."""
    flushed = ("- My cat Miso sees Dr. Almeida as her vet\n"
               "- Miso's vet is now Dr. Xavier Costa\n- Rita lives in Porto")
    provider = ScriptedProvider(["Noted.", "Got it.", flushed])
    runtime = setup(tmp_path, provider)
    runtime.models = fixed_models(provider, 200_000, profile=profile)
    session = Session.open(runtime, KEY)
    list(session.run_turn(TOLD))
    list(session.run_turn(SAID))
    list(session.flush())
    log = runtime.files.read(TODAY)
    notes = log.split("## Flush notes", 1)[1]
    assert "Dr. Xavier Costa" in notes and "Rita lives in Porto" in notes
    assert "Almeida" not in notes


def test_the_users_own_words_after_a_correction_leave_out_the_value_it_replaced(tmp_path):
    """A weak model that notes nothing when asked twice: clawd keeps the person's facts in
    their words, but not the one they corrected since."""
    provider = ScriptedProvider(["Noted.", "Got it.", "Done.", "Done."])
    runtime = make_runtime(tmp_path, provider)  # no older note says Dr. Almeida
    runtime.models = fixed_models(provider, 200_000, profile="weak")
    session = Session.open(runtime, KEY)
    list(session.run_turn(TOLD))
    list(session.run_turn(SAID))
    list(session.flush())
    log = runtime.files.read(TODAY)
    assert "Rita lives in Porto" in log
    assert "sees Dr. Almeida" not in log
    provider.assert_done()


def test_a_value_changed_twice_keeps_the_newest_change_only():
    told = standing(["I moved from Lisbon to Porto.", "Actually I moved from Porto to Braga."])
    assert [found.new for found in told] == ["Braga"]
    note, gone = left_standing("## Home\n- Moved to Porto\n- Moved to Braga", told)
    assert note == "## Home\n- Moved to Braga" and gone == ["- Moved to Porto"]
    assert left_standing("## Home\n- Moved to Porto", told) == ("", ["- Moved to Porto"])


def test_a_change_without_its_old_value_takes_no_line_out_of_a_note():
    told = standing(["My vet is now Dr. Costa."])
    note = "- Miso's vet visit is on Friday\n- Vet: Dr. Costa"
    assert left_standing(note, told) == (note, [])
