"""`setpoint tune --plant sim`: the relay experiment from the command line."""

from __future__ import annotations

import re

import pytest

from setpoint.cli.main import main
from setpoint.control.tuning import gains_for


def _figure(text: str, label: str) -> float:
    match = re.search(rf"^{label}\s+([0-9.e+-]+)", text, re.MULTILINE)
    assert match, text
    return float(match.group(1))


def test_tune_prints_ku_tu_and_the_rules_gains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--plant", "sim", "--rule", "ziegler-nichols", "--dead-time", "30"]) == 0
    out = capsys.readouterr().out
    ku, tu = _figure(out, "Ku"), _figure(out, "Tu")
    assert ku > 0
    assert tu > 0
    zn = gains_for(ku, tu, "ziegler-nichols")
    line = next(x for x in out.splitlines() if x.startswith("ziegler-nichols:"))
    kp = float(re.search(r"kp=([0-9.e+-]+)", line).group(1))  # type: ignore[union-attr]
    assert kp == pytest.approx(zn.kp, rel=1e-5)
    assert "spec.pid:" in out


def test_tune_default_rule_fits_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--plant", "sim"]) == 0
    out = capsys.readouterr().out
    gain = float(re.search(r"^model\s+gain ([0-9.e+-]+) degrees/W", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    assert gain == pytest.approx(0.01, rel=0.05)  # the simulated room's
    assert "min-iae: kp=" in out


def test_tune_refuses_a_bad_rule_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["tune", "--plant", "sim", "--rule", "guesswork"])
    assert "invalid choice: 'guesswork'" in capsys.readouterr().err


def test_tune_refuses_a_bad_plant_naming_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--plant", "sim", "--time-constant", "0"]) == 1
    assert capsys.readouterr().err.strip() == "error: time_constant: 0.0: must be > 0"
