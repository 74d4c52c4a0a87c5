"""Backend detection, device-id validation and device selection."""

from __future__ import annotations

import pytest

from common import env
from common.errors import LabError


@pytest.mark.parametrize("bad", ["abc", "-1", "0;rm -rf /", "99999", "64", "", "1.5", "$(id)", "`id`", "0\n1", "--output=/"])
def test_bad_device_ids_are_refused(bad: str) -> None:
    with pytest.raises(LabError, match="not an integer in 0..63"):
        env.parse_device_id(bad)


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("7", 7), ("63", 63), (" 3 ", 3)])
def test_good_device_ids(text: str, value: int) -> None:
    assert env.parse_device_id(text) == value


def test_forced_portable_and_unknown_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    env.detect.cache_clear()
    assert env.detect("portable").name == "portable"
    with pytest.raises(LabError, match="not one of"):
        env.detect("gpu")


def test_forced_npu_without_cann_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    monkeypatch.setattr(env, "_CANN_CANDIDATES", ())
    monkeypatch.setattr(env, "visible_devices", lambda: ())
    env.detect.cache_clear()
    with pytest.raises(LabError, match="lacks CANN"):
        env.detect("npu")
    env.detect.cache_clear()
    backend = env.detect("auto")
    assert backend.name == "portable" and "no CANN" in backend.reason


def test_npu_detected_from_a_cann_tree(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    cann = tmp_path / "ascend-toolkit" / "latest"
    (cann / "bin").mkdir(parents=True)
    (cann / "set_env.sh").write_text("")
    msprof = cann / "bin" / "msprof"
    msprof.write_text("#!/bin/sh\n")
    msprof.chmod(0o755)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann))
    monkeypatch.setattr(env, "visible_devices", lambda: (0, 1))
    env.detect.cache_clear()
    backend = env.detect()
    env.detect.cache_clear()
    assert backend.is_npu and backend.tools["msprof"] == str(msprof) and backend.devices == (0, 1)
    assert env.select_device(backend, 1)["ASCEND_RT_VISIBLE_DEVICES"] == "1"
    with pytest.raises(LabError, match="device 5 is not visible"):
        env.select_device(backend, 5)


def test_visible_devices_respects_ascend_rt_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env.glob, "glob", lambda pattern: ["/dev/davinci0", "/dev/davinci3", "/dev/davinci_manager"])
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    assert env.visible_devices() == (3,)


def test_soc_version_override_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = env.Backend("npu", "test")
    monkeypatch.setenv("SOC_VERSION", "Ascend910B3")
    assert env.soc_version(backend) == "Ascend910B3"
    monkeypatch.setenv("SOC_VERSION", "910B3; rm -rf /")
    with pytest.raises(LabError, match="does not look like"):
        env.soc_version(backend)


def test_arch_dir_is_derived() -> None:
    import platform

    assert env.host_arch_dir() == f"{platform.machine()}-linux"
