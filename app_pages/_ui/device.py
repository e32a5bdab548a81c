"""The device a run trains on, as the Train and Language-model pages say it: which one, why, in which precision,
and the memory one run may use there."""
from __future__ import annotations

import streamlit as st

from viz_core.runtime.device import DeviceInfo, describe, has_gpu, pick_device


@st.cache_resource(show_spinner=False)
def gpu_present() -> bool:
    """True when this server has a GPU (asked once per server: the answer does not change while it runs)."""
    return has_gpu()


@st.cache_resource(show_spinner=False)
def info(force_cpu: bool) -> DeviceInfo:
    """viz_core.runtime.device.describe of the device a run would train on (shared, read-only)."""
    return describe(pick_device(force_cpu), forced=force_cpu)


def caption(t, force_cpu: bool) -> str:
    """One line: the device, its precision, and why it was chosen (t: the page's translator)."""
    d = info(force_cpu)
    why = "gpu" if d.why == "gpu" and d.mixed else ("gpu_fp32" if d.why == "gpu" else d.why)
    kind = "bf16" if d.mixed else "float32"
    return t("common.device_line", name=d.name, kind=d.kind, precision=t(f"common.precision_{kind}"),
             why=t(f"common.device_why_{why}"))


def memory_caption(t, params: int, need: int, force_cpu: bool) -> str:
    """What a run of `params` parameters needs (`need` bytes) against what one run may use on its device."""
    return t("common.device_memory", params=f"{params:,}", mib=f"{need / 2 ** 20:.1f}",
             limit=f"{info(force_cpu).budget / 2 ** 20:,.0f}")
