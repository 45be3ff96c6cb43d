"""Readings from a card's own sysfs: temperature (thermal zones) and NPU load (rknpu debugfs).

Every reader takes the root of the tree, so tests point it at a directory laid out like an RK board.
A sensor that is not there reads as None ("no sensor"), never as an invented number.
"""

from __future__ import annotations

import re
from pathlib import Path

_NPU_LOAD = Path("sys/kernel/debug/rknpu/load")
_THERMAL = Path("sys/class/thermal")
_CORE_LOAD = re.compile(r"Core\d+:\s*(\d+)%")


def thermal_zones(root: Path) -> dict[str, float]:
    """Every readable thermal zone as {type: °C}; sysfs gives millidegrees."""
    zones: dict[str, float] = {}
    base = root / _THERMAL
    if not base.is_dir():
        return zones
    for zone in sorted(base.glob("thermal_zone*")):
        try:
            millideg = int((zone / "temp").read_text().strip())
        except (OSError, ValueError):
            continue
        try:
            name = (zone / "type").read_text().strip() or zone.name
        except OSError:
            name = zone.name
        zones[name] = millideg / 1000.0
    return zones


def temperature_c(root: Path) -> float | None:
    """The hottest zone, preferring NPU zones when the board names them; None without a sensor."""
    zones = thermal_zones(root)
    if not zones:
        return None
    npu = [t for name, t in zones.items() if "npu" in name.lower()]
    return max(npu or zones.values())


def npu_load_pct(root: Path) -> float | None:
    """Mean load of the NPU cores from `rknpu/load` ("NPU load:  Core0: 12%, Core1:  0%,")."""
    try:
        text = (root / _NPU_LOAD).read_text()
    except OSError:
        return None
    cores = [int(value) for value in _CORE_LOAD.findall(text)]
    if not cores:
        match = re.search(r"(\d+)%", text)
        return float(match.group(1)) if match else None
    return sum(cores) / len(cores)
