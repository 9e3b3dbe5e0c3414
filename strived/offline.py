"""Offline for real: the opt-outs of the libraries the product loads, set before they load.

Some dependencies phone home by default: onnxruntime (the detector runtime) sends telemetry events
on Linux, Ray collects usage statistics (and probes cloud metadata to tag them), and the Hugging
Face libraries may look a model up on their hub. The product needs none of that and promises to
need no network at run time, so every entry point (the CLI, the app, Ray workers, anything that
imports ``strived``) sets their documented opt-outs first (`apply_opt_outs`, called by
``strived/__init__.py``). A variable the user set explicitly is left as it is.
"""

from __future__ import annotations

import os

#: Environment opt-outs, each documented by its library. They must be set before the library
#: initialises, hence at package import.
OPT_OUTS = {
    "ORT_DISABLE_TELEMETRY": "1",          # onnxruntime: no telemetry events
    "RAY_USAGE_STATS_ENABLED": "0",        # Ray: no usage statistics (and no cloud-provider probe for them)
    "HF_HUB_OFFLINE": "1",                 # huggingface_hub: never contact the hub
    "HF_HUB_DISABLE_TELEMETRY": "1",       # huggingface_hub: no telemetry
    "TRANSFORMERS_OFFLINE": "1",           # transformers: local files only
    "HF_DATASETS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",                   # the common convention several tools honour
}


def apply_opt_outs(env=None) -> dict:
    """Set every opt-out not already set in ``env`` (default: this process's environment).
    Returns the variables set now."""
    env = os.environ if env is None else env
    done = {}
    for k, v in OPT_OUTS.items():
        if k not in env:
            env[k] = v
            done[k] = v
    return done


def onnxruntime():
    """``import onnxruntime`` with its telemetry events switched off (the environment variable
    covers initialisation; the call covers sessions created later in a process that imported
    onnxruntime before ``strived``)."""
    import onnxruntime as ort

    try:
        ort.disable_telemetry_events()
    except AttributeError:      # a build without telemetry has no switch
        pass
    return ort
