"""Mode 03's harness: what the lab does around the lessons ``03_api_pyAcl/src/export_onnx.py`` and ``infer.py``.

``python -m common.modes.pyacl`` is ``run.sh`` (:mod:`.run`), ``python -m common.modes.pyacl.build_model`` is
``build_model.sh``. The lab launches the lessons as programs (:mod:`.export`, :mod:`.acl_worker`), writes ONNX
Runtime's profile (read by common.formats.ort_profile) in msprof's layout (:mod:`.ort_profile`), and hands each
variant's files to the layers: common.analyze.checks.variants judges them, common.analyze.graph_changes names what
the converter changed, common.render.variants lays out the comparison; :mod:`.variant_report` keeps what
run_info.json records of each variant (:mod:`.variants`: the variants and their files).
"""
