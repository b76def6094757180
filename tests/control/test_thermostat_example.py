"""examples/thermostat: the manifest validates, converges (Ready) under the controller, and
`describe` shows its step figures; `--plot` draws it, or says matplotlib is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from setpoint.cli.describe import describe_object
from setpoint.cli.load import read_manifests
from setpoint.cli.main import main
from setpoint.control.thermostat import THERMOSTAT, setup
from setpoint.model import get_condition
from setpoint.testing import Harness, ManualClock, reconcile_until_stable

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "thermostat"


async def test_the_example_converges_and_describe_shows_the_step() -> None:
    (manifest,) = read_manifests([str(EXAMPLE)])
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(manifest.obj)
        await reconcile_until_stable(harness)
        for _ in range(120):  # two minutes of the example's real time
            clock.advance(1.0)
            await reconcile_until_stable(harness)
            obj = await harness.store.get(
                THERMOSTAT.api_version, THERMOSTAT.kind, "living-room", "default"
            )
            if get_condition(obj["status"], "Ready")["status"] == "True":  # type: ignore[index]
                break
        else:
            raise AssertionError(f"not Ready: {obj['status']}")
        for _ in range(60):  # let it settle, so the settling time is known
            clock.advance(1.0)
            await reconcile_until_stable(harness)
        obj = await harness.store.get(
            THERMOSTAT.api_version, THERMOSTAT.kind, "living-room", "default"
        )
    text = describe_object(obj, [], clock.now())
    assert "Last Step:" in text
    overshoot = float(text.split("Overshoot:")[1].split("%")[0])
    assert 0.0 <= overshoot <= 10.0
    settling = text.split("Settling Time:")[1].splitlines()[0].strip()
    assert settling.endswith("s")
    assert settling != "not settled"


def test_plot_draws_a_png_or_names_the_missing_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path}/state.db"
    monkeypatch.chdir(tmp_path)
    assert main(["--store", store, "apply", "-f", str(EXAMPLE)]) == 0
    png = tmp_path / "room.png"
    status = main(["--store", store, "describe", "thermostat/living-room", "--plot", str(png)])
    err = capsys.readouterr().err
    if importlib.util.find_spec("matplotlib") is None:
        assert status == 1
        assert "--plot needs matplotlib" in err
    else:
        # No engine ran it: no samples to draw yet.
        assert status == 1
        assert "no samples yet" in err


def test_write_plot_makes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the optional `plot` extra
    from setpoint.control.thermostat import write_plot

    trace = [[10.0 * i, 21.0, 15.0 + 0.1 * i, 3000.0 - 20.0 * i] for i in range(50)]
    obj = {"metadata": {"name": "room"}, "status": {"trace": trace}}
    write_plot(obj, tmp_path / "room.png")
    assert (tmp_path / "room.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
