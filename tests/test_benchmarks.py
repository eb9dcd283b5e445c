"""The conversation benchmark runs: one short pass, so a change to the adapters cannot silently break it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.stub_ha import StubHomeAssistant

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_the_conversation_benchmark_completes_a_confirmed_invocation(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each path and capability prints its line (it once died on a body its timer had already read)."""
    for name in ("CONSOLE_HA_LLM_URL", "CONSOLE_HA_LLM_MODEL", "CONSOLE_HA_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    spec = importlib.util.spec_from_file_location("bench_conversation", BENCHMARKS / "bench_conversation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_conversation", module)
    spec.loader.exec_module(module)
    module.main(["--iterations", "1", "--warmup", "0"])
    lines = capsys.readouterr().out.splitlines()
    for path in ("http", "service"):
        for capability in ("list_entities", "get_history"):
            assert any(line.split()[:2] == [path, capability] for line in lines), lines


def test_the_language_benchmark_prints_each_page_in_each_language_against_english(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: one short pass prints a ratio per page and language (the figures are not judged here)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_language", BENCHMARKS / "bench_language.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_language", module)
    spec.loader.exec_module(module)
    module.main(["--rounds", "2"])
    lines = capsys.readouterr().out.splitlines()
    for page in ("/login", "/settings/home-assistant", "/activity"):
        for language in ("fr", "zh-Hans"):
            assert any(line.split()[:3] == [page, language, "/"] for line in lines), lines


def test_the_instances_benchmark_prints_each_read_with_one_and_two_instances(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stub_ha: StubHomeAssistant) -> None:
    """Issue 29: one short pass against a stub in place of the real core prints each read's ratio against its
    target, and the card's own (the figures are not judged here)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_instances", BENCHMARKS / "bench_instances.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_instances", module)
    spec.loader.exec_module(module)
    entities = tuple(state["entity_id"] for state in stub_ha.states)
    module.main(["--rounds", "2"], core=module.Core(stub_ha.base_url, stub_ha.token, entities))
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    for read in ("get_state:", "list_entities:"):
        assert any(line[:4] == [read, "two", "against", "one"] and line[-2:-1] == ["1.05x"] for line in lines), lines
    assert any(line[:2] == ["(info)", "get_state's"] for line in lines), lines
    # Both reads reached the core standing in for home (the second instance's address is never read).
    paths = {request.path for request in stub_ha.requests}
    assert {"/api/states", "/api/states/sensor.living_room_temperature"} <= paths


def test_the_plugins_benchmark_prints_each_kind_against_before(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stub_ha: StubHomeAssistant) -> None:
    """Issue 30: one short pass against a stub in place of the real core reads through the three kinds (before, no
    plugin, the two examples) and prints each ratio against its target (the figures are not judged here); notify
    posted once a read, and quiet hours (set away from now) let every read through."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_plugins", BENCHMARKS / "bench_plugins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_plugins", module)
    spec.loader.exec_module(module)
    figures = module.main(["--rounds", "2"], core=module.Core(stub_ha.base_url, stub_ha.token))
    lines = capsys.readouterr().out.splitlines()
    assert "notify's POSTs received 2 (one a read: True)" in lines[0], lines
    assert [(figure.label, figure.target) for figure in figures if figure.target] == [
        ("no plugin against before, wall (paired median)", "<= 1.02x"),
        ("  ... CPU against before (paired median)", "<= 1.02x"),
        ("two examples against before, wall (paired median)", "<= 1.10x"),
        ("  ... CPU against before (paired median)", "<= 1.10x")]
    assert [line.split(":")[0].strip() for line in lines if ": a read (median)" in line] == [
        "before", "no plugin", "two examples"]
    # Every read of every kind reached the core: 2 warm reads and 2 rounds, three kinds.
    assert sum(request.path == "/api/states/sensor.living_room_temperature" for request in stub_ha.requests) == 12
