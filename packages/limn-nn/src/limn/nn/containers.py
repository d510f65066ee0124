"""Containers and shape layers, as torch.nn's: Sequential, ModuleList, ModuleDict, Identity, Flatten, Unflatten.

Each is a limn.nn.module.Module. A container keeps its modules as attributes named as torch names them ("0",
"1", ... or the dict's keys), so named_parameters() finds `0.weight` where torch's state_dict has it.
Sequential calls its modules in order; the shape layers reshape: Flatten (N, C, H, W) -> (N, C H W), Unflatten back.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from limn.frontend.arguments import normalize_axis
from limn.frontend.tensor import Tensor
from limn.nn.module import MODULE_STATE, Module


def _held(container: Module) -> dict[str, Any]:
    """The modules a container holds: its attributes but those Module's methods set (train() sets `training`)."""
    return {name: m for name, m in vars(container).items() if name not in MODULE_STATE}


class ModuleList(Module):
    """torch.nn.ModuleList: modules held as attributes "0", "1", ..., indexable and iterable."""

    def __init__(self, modules: Iterable[Any] = ()):
        for m in modules:
            self.append(m)

    def _items(self) -> list[Any]:
        return list(_held(self).values())

    def append(self, module: Any) -> ModuleList:
        """Adds a module at the end, held as attribute str(len(self)); returns self."""
        setattr(self, str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Any]) -> ModuleList:
        """Appends each module in turn; returns self."""
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i: int | slice) -> Any:
        items = self._items()
        return type(self)(items[i]) if isinstance(i, slice) else items[i]

    def __len__(self) -> int:
        return len(_held(self))

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())


class Sequential(ModuleList):
    """torch.nn.Sequential: calls its modules in order, each on the last one's output. Built from modules
    (named "0", "1", ...) or from one dict of name -> module.

    >>> from limn.nn import Linear
    >>> model = Sequential(Linear(3, 4), Flatten())
    >>> model(Tensor.ones((2, 3))).shape, [name for name, _ in model.named_parameters()]
    ((2, 4), ['0.weight', '0.bias'])
    """

    def __init__(self, *modules: Any):
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            for name, m in modules[0].items():
                setattr(self, name, m)
        else:
            super().__init__(modules)

    def __getitem__(self, i: int | slice) -> Any:
        items = self._items()
        return Sequential(*items[i]) if isinstance(i, slice) else items[i]

    def forward(self, x: Any) -> Any:
        for m in self._items():
            x = m(x)
        return x


class ModuleDict(Module):
    """torch.nn.ModuleDict: modules held as attributes under their keys, in insertion order."""

    def __init__(self, modules: Mapping[str, Any] | None = None):
        for name, m in (modules or {}).items():
            self[name] = m

    def __getitem__(self, key: str) -> Any:
        return _held(self)[key]

    def __setitem__(self, key: str, module: Any) -> None:
        if key in MODULE_STATE:
            raise KeyError(f"ModuleDict: {key!r} is an attribute Module uses; name the module otherwise")
        setattr(self, key, module)

    def __contains__(self, key: str) -> bool:
        return key in _held(self)

    def __len__(self) -> int:
        return len(_held(self))

    def __iter__(self) -> Iterator[str]:
        return iter(_held(self))

    def keys(self) -> Iterable[str]:
        """The names the modules are held under, in insertion order."""
        return _held(self).keys()

    def values(self) -> Iterable[Any]:
        """The modules, in insertion order."""
        return _held(self).values()

    def items(self) -> Iterable[tuple[str, Any]]:
        """(name, module) pairs, in insertion order."""
        return _held(self).items()


class Identity(Module):
    """torch.nn.Identity: gives its input back (any constructor arguments are ignored, as torch's)."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def forward(self, x: Any) -> Any:
        return x


class Flatten(Module):
    """torch.nn.Flatten: dims start_dim..end_dim (inclusive) merged into one; (N, C, H, W) -> (N, C H W)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    """torch.nn.Unflatten: dim `dim` split into unflattened_size (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]):
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        d = normalize_axis(self.dim, x.ndim, "Unflatten")
        return x.reshape(x.shape[:d] + self.unflattened_size + x.shape[d + 1 :])
