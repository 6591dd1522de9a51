"""The CUDA driver as the library sees it (it opens ``libcuda.so.1`` itself, or the file named by
``GPUMEM_CUDA_DRIVER``, and links no CUDA runtime), and the error for a strategy that needs a newer
driver than the running one."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Optional

from . import _library

ERR_DRIVER = 7  # GPUMEM_TORCH_ERR_DRIVER (gpumem_torch.h)


class DriverUnsupportedError(RuntimeError):
    """The running CUDA driver is older than ``strategy`` needs: ``needs`` is the entry point or
    feature (e.g. ``"host-located cuMemCreate (CU_MEM_LOCATION_TYPE_HOST_NUMA)"``),
    ``required_version`` the CUDA version whose driver first has it (12020 is CUDA 12.2) and
    ``driver_version`` the running driver's (cuDriverGetVersion). Other strategies still work."""

    def __init__(self, message: str, strategy: str, needs: str, required_version: int, driver_version: int):
        super().__init__(message)
        self.strategy = strategy
        self.needs = needs
        self.required_version = required_version
        self.driver_version = driver_version


def driver_info() -> Dict[str, Any]:
    """The CUDA driver as gpumem sees it: ``loaded``, ``version`` (e.g. 12040; 0 without a driver),
    ``path`` (the library opened), ``failure`` (why it is not usable), ``needs`` (each strategy's
    entry points and features with the CUDA version of each) and ``refused`` (per strategy, the
    first need this driver lacks, or None). Opens the driver but creates no CUDA context."""
    lib = _library.load()
    text = lib.gpumem_driver_json()
    if text is None:
        raise RuntimeError(_library.last_error())
    info: Dict[str, Any] = json.loads(text.decode())
    return info


def unsupported(message: str) -> DriverUnsupportedError:
    """The typed error for the library's refusal ``message`` ("gpumem: strategy 'tiered' needs ...")."""
    info = driver_info()
    match = re.search(r"strategy '([^']+)'", message)
    strategy = match.group(1) if match else ""
    refused: Optional[Dict[str, Any]] = info["refused"].get(strategy)
    needs = refused["what"] if refused else ""
    version = int(refused["version"]) if refused else 0
    return DriverUnsupportedError(message, strategy, needs, version, int(info["version"]))
