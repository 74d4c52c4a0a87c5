"""Mode 03's harness: what the lab does around the lessons ``03_api_pyAcl/src/export_onnx.py`` and ``infer.py``.

``python -m common.modes.pyacl`` is ``run.sh`` (:mod:`.run`), ``python -m common.modes.pyacl.build_model`` is
``build_model.sh``. The lab launches the lessons as programs (:mod:`.export`, :mod:`.acl_worker`), converts ONNX
Runtime's profile into msprof's layout (:mod:`.ort_profile`), and checks and reports every variant
(:mod:`.variants`, :mod:`.graph_changes`, :mod:`.variant_report`).
"""
