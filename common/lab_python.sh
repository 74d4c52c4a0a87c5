# Sourced by every mode's run.sh: sets PYTHON to the interpreter the lab runs under.
#   $PYTHON, when set, wins (nox sets it to its environment).
#   Else the environment `nox` builds, .nox/lab-<backend>/bin/python (complete: .lab-stamp is written last);
#   its bin/ goes first on PATH, as activating it would, so a program run as `python3 prog.py` uses it too.
#   Else one Error line saying how to build it, exit 2.
# Usage: source "<repo>/common/lab_python.sh" <nox session>
if [ -z "${PYTHON:-}" ]; then
    _lab_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    case "${MSPROF_LAB_BACKEND:-}" in
        npu) _lab_backends="npu" ;;
        portable) _lab_backends="portable" ;;
        *) _lab_backends="npu portable" ;;
    esac
    for _lab_backend in $_lab_backends; do
        _lab_env="$_lab_root/.nox/lab-$_lab_backend"
        if [ -x "$_lab_env/bin/python" ] && [ -f "$_lab_env/.lab-stamp" ]; then
            PYTHON="$_lab_env/bin/python"
            export PATH="$_lab_env/bin:$PATH"
            break
        fi
    done
    if [ -z "${PYTHON:-}" ]; then
        echo "Error: the lab's Python environment (.nox/lab-<backend>) is not built and PYTHON is not set —" \
            "build it once with: python3 -m pip install nox && nox -s ${1:-cmdline} (or set PYTHON to a python" \
            "that has the lab's packages)" >&2
        exit 2
    fi
    unset _lab_root _lab_backends _lab_backend _lab_env
fi
