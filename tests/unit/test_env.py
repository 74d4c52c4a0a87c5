"""Backend detection, device-id validation and device selection."""

from __future__ import annotations

import pytest

from common import backend as backend_module
from common.backend import (
    Backend,
    chip_names,
    count_from_npu_smi_list,
    detect,
    host_arch_dir,
    logical_devices,
    parse_device_id,
    select_device,
    soc_version,
)
from common.errors import LabError


@pytest.mark.parametrize(
    "bad", ["abc", "-1", "0;rm -rf /", "99999", "64", "", "1.5", "$(id)", "`id`", "0\n1", "--output=/"]
)
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
    monkeypatch.setattr(
        backend_module, "logical_devices", lambda npu_smi: ((), "/dev/davinci* nodes, npu-smi not found")
    )
    detect.cache_clear()
    with pytest.raises(LabError, match="lacks CANN"):
        detect("npu")
    detect.cache_clear()
    backend = detect("auto")
    assert backend.name == "portable" and "no CANN" in backend.reason
    assert "no NPU (none counted from /dev/davinci* nodes, npu-smi not found)" in backend.reason


def test_npu_detected_from_a_cann_tree(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    cann = tmp_path / "ascend-toolkit" / "latest"
    (cann / "bin").mkdir(parents=True)
    (cann / "set_env.sh").write_text("")
    msprof = cann / "bin" / "msprof"
    msprof.write_text("#!/bin/sh\n")
    msprof.chmod(0o755)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann))
    monkeypatch.setattr(backend_module, "logical_devices", lambda npu_smi: ((0, 1), "`npu-smi info -l`"))
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    detect.cache_clear()
    backend = detect()
    detect.cache_clear()
    assert backend.is_npu and backend.tools["msprof"] == str(msprof) and backend.devices == (0, 1)
    assert "logical devices 0..1 (counted from `npu-smi info -l`)" in backend.reason
    # The program selects the device itself: the environment is passed on unchanged, no visibility variable.
    env = select_device(backend, 1)
    assert "ASCEND_RT_VISIBLE_DEVICES" not in env and env["ASCEND_HOME_PATH"] == str(cann)
    with pytest.raises(LabError, match=r"device 5 is not a logical device id here \(valid: 0, 1\)"):
        select_device(backend, 5)


def test_ascend_rt_visible_devices_is_refused_while_profiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """CANN's ASCEND_RT_VISIBLE_DEVICES page: not supported while profiling; the lab says so, in one line."""
    backend = Backend("npu", "test", "/cann", {"msprof": "/cann/bin/msprof"}, tuple(range(8)))
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    with pytest.raises(
        LabError, match="ASCEND_RT_VISIBLE_DEVICES='3' is set; CANN does not support it while profiling"
    ) as err:
        select_device(backend, 0)
    assert "logical device id (0..7)" in err.value.fix
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")  # the portable backend has no NPU runtime to confuse
    assert select_device(Backend("portable", "test"), 0)["ASCEND_RT_VISIBLE_DEVICES"] == "3"


NPU_SMI_LIST_8 = "\n".join(
    ["        Total Count                    : 8", ""]
    + [
        line
        for k in range(8)
        for line in (
            f"        NPU ID                         : {k}",
            "        Product Name                   : IT21DMDA",
            f"        Serial Number                  : 033ALXX0000{k}",
            "        Chip Count                     : 1",
            "",
        )
    ]
)
NPU_SMI_LIST_DUO = """
        Total Count                    : 1

        NPU ID                         : 1
        Product Name                   : Atlas 300I Duo
        Serial Number                  : 102XXXXXXX
        Chip Count                     : 2
"""


@pytest.mark.parametrize(
    ("text", "count"),
    [
        (NPU_SMI_LIST_8, 8),
        (NPU_SMI_LIST_DUO, 2),  # one card, two chips: two logical devices
        ("        Total Count                    : 4\n", 4),  # no per-NPU blocks: the total
        ("        NPU ID : 4\n        Product Name : x\n", 1),  # a container that mounts one card: logical 0
        ("", None),
        ("npu-smi: command not permitted\n", None),
        ("        Total Count : 0\n", None),
    ],
)
def test_device_count_from_npu_smi_list(text: str, count: int | None) -> None:
    assert count_from_npu_smi_list(text) == count


def test_logical_devices_come_from_npu_smi_and_davinci_nodes_only_without_it(tmp_path, monkeypatch) -> None:
    npu_smi = tmp_path / "npu-smi"
    npu_smi.write_text("#!/bin/sh\ncat <<'EOF'\n" + NPU_SMI_LIST_8 + "\nEOF\n")
    npu_smi.chmod(0o755)
    nodes = ["/dev/davinci4", "/dev/davinci_manager", "/dev/davinci12"]
    monkeypatch.setattr(backend_module.glob, "glob", lambda pattern: nodes)
    assert logical_devices(str(npu_smi)) == (tuple(range(8)), "`npu-smi info -l`")
    # No npu-smi: the node count, never the node numbers (davinci4 alone is logical device 0).
    assert logical_devices(None) == ((0, 1), "/dev/davinci* nodes, npu-smi not found")
    npu_smi.write_text("#!/bin/sh\necho 'no NPU here'\n")
    assert logical_devices(str(npu_smi)) == ((), "`npu-smi info -l`")


def test_soc_version_override_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Backend("npu", "test")
    for name in ("Ascend910B3", "Ascend910B4-1", "Ascend910_9391", "Ascend310P3"):
        monkeypatch.setenv("SOC_VERSION", name)
        assert soc_version(backend) == name
    for bad in ("910B3; rm -rf /", "Ascend910B4-", "Ascend-1", "Ascend910B4-1-2", "Ascend 910B3"):
        monkeypatch.setenv("SOC_VERSION", bad)
        with pytest.raises(LabError, match="does not look like"):
            soc_version(backend)


def test_arch_dir_is_derived() -> None:
    import platform

    assert host_arch_dir() == f"{platform.machine()}-linux"


# `npu-smi info` as the driver prints it (column layout of npu-smi 23.x / 24.x; values made up, shapes real).
def _npu_smi_910b(cards: int, name: str = "910B3") -> str:
    rows = [
        "+------------------------------------------------------------------------------------------------+",
        "| npu-smi 23.0.6                   Version: 23.0.6                                               |",
        "+---------------------------+---------------+----------------------------------------------------+",
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
        "+===========================+===============+====================================================+",
    ]
    for k in range(cards):
        rows += [
            f"| {k:<5} {name:<19} | OK            | 96.4        37                0    / 0             |",
            f"| 0                         | 0000:C{k}:00.0  | 0           0    / 0          3105 / 65536         |",
            "+===========================+===============+====================================================+",
        ]
    rows += [
        "+---------------------------+---------------+----------------------------------------------------+",
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
        "+===========================+===============+====================================================+",
        "| 0       0                 | 3105          | python3                  | 3105                    |",
        "+===========================+===============+====================================================+",
    ]
    return "\n".join(rows) + "\n"


NPU_SMI_310P_DUO = """\
+--------------------------------------------------------------------------------------------------------+
| npu-smi 23.0.0                                   Version: 23.0.0                                       |
+-------------------------------+-----------------+------------------------------------------------------+
| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |
| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |
+===============================+=================+======================================================+
| 1       310P3                 | OK              | NA           49                0     / 0             |
| 0       0                     | 0000:02:00.0    | 0            3105 / 21527                            |
+-------------------------------+-----------------+------------------------------------------------------+
| 1       310P3                 | OK              | NA           47                0     / 0             |
| 1       1                     | 0000:03:00.0    | 0            1680 / 21527                            |
+===============================+=================+======================================================+
"""


def test_chip_names_are_read_by_column() -> None:
    assert chip_names(_npu_smi_910b(8)) == dict.fromkeys(range(8), "910B3")
    assert chip_names(NPU_SMI_310P_DUO) == {0: "310P3", 1: "310P3"}
    assert chip_names("npu-smi: not found\n") == {}


@pytest.mark.parametrize(
    ("text", "device", "soc"),
    [
        (_npu_smi_910b(8), 0, "Ascend910B3"),
        (_npu_smi_910b(8), 7, "Ascend910B3"),
        (_npu_smi_910b(2, "910B4"), 1, "Ascend910B4"),
        (_npu_smi_910b(2, "910B4-1"), 1, "Ascend910B4-1"),  # a hyphenated name (torch_npu's socVersionMap)
        # "3105 / 65536" (HBM), a pid 3105 and memory 3105 sit in other columns: never read as a chip
        (_npu_smi_910b(1), 0, "Ascend910B3"),
        (NPU_SMI_310P_DUO, 1, "Ascend310P3"),
    ],
)
def test_soc_version_from_the_npu_smi_table(text, device, soc, tmp_path, monkeypatch) -> None:
    npu_smi = tmp_path / "npu-smi"
    (tmp_path / "out.txt").write_text(text)
    npu_smi.write_text(f"#!/bin/sh\ncat '{tmp_path / 'out.txt'}'\n")
    npu_smi.chmod(0o755)
    monkeypatch.delenv("SOC_VERSION", raising=False)
    backend = Backend("npu", "test", "/cann", {"npu-smi": str(npu_smi)}, tuple(range(8)))
    assert soc_version(backend, device) == soc
    with pytest.raises(LabError, match=r"chip Name of device 9 .*set SOC_VERSION"):
        soc_version(backend, 9)
    monkeypatch.setenv("SOC_VERSION", "Ascend310B1")  # the override wins over the table
    assert soc_version(backend, device) == "Ascend310B1"
