"""Transports: how a device's buffers reach MPI, and which way each device goes.

The numpy and c devices keep every buffer in host memory as a numpy array, so a collective reads them where
they are (the buckets copy them out; nothing is staged). A device whose buffers live elsewhere (cuda's, in
GPU memory) is copied to the host for the collective and back after it: MPI with host staging.
`describe(device)` says which one a device gets, for the log line a training run prints.
Pipeline: tensor buffers -> **transport** -> buckets -> MPI.
"""

from __future__ import annotations

import numpy as np

from limn.device import get_device
from limn.tensor import Tensor


def host_arrays(tensors: list[Tensor]) -> list[np.ndarray]:
    """Each realized tensor's bytes as a host array: the buffer itself on host devices (read, never written
    through), a copy from the device otherwise."""
    arrays = []
    for t in tensors:
        buffer = t.node.arg
        if isinstance(buffer.handle, np.ndarray):
            arrays.append(buffer.handle.reshape(t.shape))
        else:
            arrays.append(buffer.numpy().reshape(t.shape))
    return arrays


def describe(device: str) -> str:
    """How collectives move a device's buffers, in a phrase for a log line."""
    probe = get_device(device).alloc(Tensor([0.0]).dtype, (1,))
    if isinstance(probe, np.ndarray):
        return f"{device}: MPI reads the host buffers directly"
    return f"{device}: MPI with host staging (each bucket copied to the host and back)"
