"""Sensor readers against fixture trees laid out like an RK board, and a tree with no sensors."""

from __future__ import annotations

from pathlib import Path

from app.telemetry import sysfs
from tests.harness import rk_board


def test_rk_board_temperatures_and_npu_load(tmp_path: Path) -> None:
    root = rk_board(
        tmp_path,
        zones={"soc-thermal": 48250, "npu-thermal": 61500, "gpu-thermal": 70125},
        npu_load="NPU load:  Core0: 12%, Core1:  0%, Core2: 60%,\n",
    )
    assert sysfs.thermal_zones(root) == {"soc-thermal": 48.25, "npu-thermal": 61.5, "gpu-thermal": 70.125}
    assert sysfs.temperature_c(root) == 61.5  # the NPU's own zone, not the hottest elsewhere
    assert sysfs.npu_load_pct(root) == 24.0


def test_board_without_npu_zone_reports_hottest(tmp_path: Path) -> None:
    root = rk_board(tmp_path, zones={"soc-thermal": 40000, "cpu-thermal": 52000}, npu_load="NPU load:  45%\n")
    assert sysfs.temperature_c(root) == 52.0
    assert sysfs.npu_load_pct(root) == 45.0


def test_no_sensors_means_none_never_a_number(tmp_path: Path) -> None:
    assert sysfs.thermal_zones(tmp_path) == {}
    assert sysfs.temperature_c(tmp_path) is None
    assert sysfs.npu_load_pct(tmp_path) is None


def test_unreadable_or_garbled_files_are_skipped(tmp_path: Path) -> None:
    root = rk_board(tmp_path, zones={"soc-thermal": 45000}, npu_load="garbage\n")
    (root / "sys/class/thermal/thermal_zone9").mkdir()
    (root / "sys/class/thermal/thermal_zone9/temp").write_text("not a number")
    assert sysfs.thermal_zones(root) == {"soc-thermal": 45.0}
    assert sysfs.npu_load_pct(root) is None
