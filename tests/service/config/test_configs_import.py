"""``topic-config --import``: kafka-configs.sh's describe text becomes logcleaner's topic overrides, the
topics' own (DYNAMIC_TOPIC_CONFIG) values only, all in one step; bad text is exit 2 naming the line."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given

from service.base.errors import InvalidInputError
from service.config.configs_import import parse_topic_configs_description
from service.config.topic_store import TopicConfigStore
from service.shell.cli import main

# What kafka-configs.sh --describe [--all] --entity-type topics printed (lines too long for the code).
DESCRIBE_ALL = (Path(__file__).parent / "kafka-configs-describe-topics.txt").read_text()


def test_only_the_topics_own_configs_are_imported() -> None:
    imported = parse_topic_configs_description(DESCRIBE_ALL, source="describe.txt")
    assert imported.topics == {
        "orders": {"cleanup.policy": "compact", "segment.bytes": "1048576"},
        "__consumer_offsets": {"cleanup.policy": "compact", "segment.bytes": "104857600"},
        "audit": {"retention.ms": "1000"},
    }
    assert imported.skipped == [("orders", "min.insync.replicas", "not a topic config logcleaner uses")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Dynamic configs for broker 1 are:\n", "describe.txt, line 1: configs of a broker"),
        ("  retention.ms=1 sensitive=false synonyms={}\n", "describe.txt, line 1: expected"),
        ("All configs for topic t are:\nretention.ms=1\n", "describe.txt, line 2: expected"),
        (
            "All configs for topic t are:\n"
            "  retention.ms=-7 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=-7}\n",
            "describe.txt, line 2: topic t: Invalid value",
        ),
    ],
)
def test_text_it_cannot_read_is_an_error_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_topic_configs_description(text, source="describe.txt")


def test_the_cli_stores_them_as_overrides_in_one_step(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    describe = tmp_path / "describe.txt"
    describe.write_text(DESCRIBE_ALL)
    logs = tmp_path / "logs"
    logs.mkdir()
    store = TopicConfigStore([logs])
    store.update("orders", {"retention.bytes": "5"})
    before = store.version
    code = main(["topic-config", "--import", str(describe), "--json", "--override", f"log.dirs={logs}"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["imported"]["audit"] == {"retention.ms": "1000"}
    reread = TopicConfigStore([logs])
    assert reread.version == before + 1, "one version for every topic"
    assert reread.get("orders") == {
        "retention.bytes": "5",
        "cleanup.policy": "compact",
        "segment.bytes": "1048576",
    }
    assert reread.get("__consumer_offsets")["cleanup.policy"] == "compact"

    describe.write_text(
        "Dynamic configs for topic t are:\n"
        "  retention.ms=x sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=x}\n"
    )
    code = main(["topic-config", "--import", str(describe), "--override", f"log.dirs={logs}"])
    out, err = capsys.readouterr()
    assert code == 2 and f"{describe}, line 2" in err and len(err.strip().splitlines()) == 1
    assert TopicConfigStore([logs]).version == before + 1, "nothing written"


@given(st.text(max_size=200))
def test_arbitrary_text_fails_only_as_invalid_input(text: str) -> None:
    with contextlib.suppress(InvalidInputError):
        parse_topic_configs_description(text, source="describe.txt")
