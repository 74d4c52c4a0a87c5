"""Backend detection, device-id validation and device selection."""

from __future__ import annotations

import pytest

from common import backend as backend_module
from common.backend import Backend, detect, host_arch_dir, parse_device_id, select_device, soc_version, visible_devices
from common.errors import LabError


@pytest.mark.parametrize("bad", ["abc", "-1", "0;rm -rf /", "99999", "64", "", "1.5", "$(id)", "`id`", "0\n1", "--output=/"])
def test_bad_device_ids_are_refused(bad: str) -> None:
    with pytest.raises(LabError, match="not an integer in 0..63"):
        parse_device_id(bad)


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("7", 7), ("63", 63), (" 3 ", 3)])
def test_good_device_ids(text: str, value: int) -> None:
    assert parse_device_id(text) == value


def test_forced_portable_and_unknown_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    detect.cache_clear()
    assert detect("portable").name == "portable"
    with pytest.raises(LabError, match="not one of"):
        detect("gpu")


def test_forced_npu_without_cann_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    monkeypatch.setattr(backend_module, "_CANN_CANDIDATES", ())
    monkeypatch.setattr(backend_module, "visible_devices", lambda: ())
    detect.cache_clear()
    with pytest.raises(LabError, match="lacks CANN"):
        detect("npu")
    detect.cache_clear()
    backend = detect("auto")
    assert backend.name == "portable" and "no CANN" in backend.reason


def test_npu_detected_from_a_cann_tree(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    cann = tmp_path / "ascend-toolkit" / "latest"
    (cann / "bin").mkdir(parents=True)
    (cann / "set_env.sh").write_text("")
    msprof = cann / "bin" / "msprof"
    msprof.write_text("#!/bin/sh\n")
    msprof.chmod(0o755)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann))
    monkeypatch.setattr(backend_module, "visible_devices", lambda: (0, 1))
    detect.cache_clear()
    backend = detect()
    detect.cache_clear()
    assert backend.is_npu and backend.tools["msprof"] == str(msprof) and backend.devices == (0, 1)
    assert select_device(backend, 1)["ASCEND_RT_VISIBLE_DEVICES"] == "1"
    with pytest.raises(LabError, match="device 5 is not visible"):
        select_device(backend, 5)


def test_visible_devices_respects_ascend_rt_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend_module.glob, "glob", lambda pattern: ["/dev/davinci0", "/dev/davinci3", "/dev/davinci_manager"])
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    assert visible_devices() == (3,)


def test_soc_version_override_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Backend("npu", "test")
    monkeypatch.setenv("SOC_VERSION", "Ascend910B3")
    assert soc_version(backend) == "Ascend910B3"
    monkeypatch.setenv("SOC_VERSION", "910B3; rm -rf /")
    with pytest.raises(LabError, match="does not look like"):
        soc_version(backend)


def test_arch_dir_is_derived() -> None:
    import platform

    assert host_arch_dir() == f"{platform.machine()}-linux"
