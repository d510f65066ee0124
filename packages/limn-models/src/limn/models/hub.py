"""Hugging Face checkpoints from local files: a folder in the layout `save_pretrained` writes becomes a limn model.

GPT-2, and the LLaMA family as Hugging Face spells it: llama (LLaMA 2 and 3, SmolLM, TinyLlama), mistral (a
sliding window, served up to the window's length) and qwen2 (biases on q, k and v).

The folder holds config.json (its `model_type` picks the family) and the weights as model.safetensors, or as
shards that model.safetensors.index.json lists. Each family's LAYOUTS row says what its files need on the way
in, done once as they load: a prefix a base model's files lack (GPT-2's `transformer.`), buffers some files carry
that limn computes itself (GPT-2's causal masks, an old LLaMA's inverse frequencies), and weights stored
transposed (GPT-2's Conv1D projections). The model is built with placeholder parameters, which allocate
nothing (limn.nn.init.skipped), so a file that does not fit its config is refused before any memory goes to it;
then each parameter takes its tensor from the file, and a tied weight (GPT-2's head) is the tensor it is tied to.
Nothing is downloaded: get the files onto the machine first (examples/generate.py says how).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from limn import dtypes
from limn.dtypes import DType
from limn.errors import ArgumentError
from limn.frontend.tensor import Tensor
from limn.models.gpt2 import GPT2, GPT2Config
from limn.models.llama import Llama, LlamaConfig
from limn.nn import init, walk
from limn.nn.module import Module
from limn.serialize import load


@dataclass(frozen=True)
class Layout:
    """How one family's checkpoint names meet limn's: see the module docstring."""

    model: type[Module]
    config: type
    prefix: str  # what the model's body sits under, which the files of a base model (no head) leave off
    dropped: tuple[str, ...]  # name endings of buffers limn computes itself
    transposed: tuple[str, ...]  # name endings of weights stored (in, out), where Linear keeps (out, in)
    fixed: dict[str, Any] = field(default_factory=dict)  # config fields the family implies (Qwen2's q, k, v biases)


LAYOUTS: dict[str, Layout] = {
    "gpt2": Layout(
        GPT2,
        GPT2Config,
        prefix="transformer.",
        dropped=(".attn.bias", ".attn.masked_bias"),
        transposed=(".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"),
    ),
    "llama": Layout(Llama, LlamaConfig, prefix="model.", dropped=(".rotary_emb.inv_freq",), transposed=()),
    "mistral": Layout(Llama, LlamaConfig, prefix="model.", dropped=(".rotary_emb.inv_freq",), transposed=()),
    "qwen2": Layout(
        Llama, LlamaConfig, prefix="model.", dropped=(".rotary_emb.inv_freq",), transposed=(), fixed={"qkv_bias": True}
    ),
}


def from_pretrained(
    folder: str | os.PathLike,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    context: int | None = None,
) -> Module:
    """The model a Hugging Face checkpoint folder holds, its weights in `dtype` on `device`. `context` caps the
    positions it serves (a LLaMA's rotary tables are that long; the config's maximum when None). The tokens
    generation stops at are generation_config.json's when the folder has one, as transformers' generate takes.

    Raises FileNotFoundError naming what the folder lacks, and ArgumentError for a family limn does not build
    or a checkpoint whose tensors do not fit the config (naming the tensors)."""
    folder = Path(folder)
    fields = read_config(folder)
    family = fields.get("model_type")
    if not isinstance(family, str) or family not in LAYOUTS:
        raise ArgumentError(
            f"{folder / 'config.json'}: model_type {family!r} is not a family limn builds; it has {sorted(LAYOUTS)}"
        )
    layout = LAYOUTS[family]
    config = layout.config.from_dict(fields | layout.fixed | _stops(folder))
    with init.skipped(placeholders=True):  # every parameter is about to come from the file: none is allocated
        model = layout.model(config, context=context)
    named = dict(walk.named_parameters(model))  # a tied weight once, under its first name
    aliases = {name for name, _ in walk.named_parameters(model, remove_duplicate=False)} - set(named)
    weights = _renamed(read_weights(folder, device), layout, named, aliases, folder)
    dtype = dtypes.as_dtype(dtype)
    by_id = {id(t): name for name, t in named.items()}
    # each parameter becomes its file's tensor, cast (and made a buffer of its own) as it is swapped in
    walk.replace_tensors(model, lambda t: weights[by_id[id(t)]].cast(dtype) if id(t) in by_id else t)
    return model.to(device) if device is not None else model


def _stops(folder: Path) -> dict[str, Any]:
    """generation_config.json's eos_token_id where the folder has one: the tokens transformers' generate stops
    at (an instruct model's end-of-turn beside its end-of-text), which config.json may not list."""
    path = folder / "generation_config.json"
    if not path.is_file():
        return {}
    with open(path, encoding="utf-8") as f:
        fields = json.load(f)
    eos = fields.get("eos_token_id") if isinstance(fields, dict) else None
    return {} if eos is None else {"eos_token_id": eos}


def read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder}: no config.json; a Hugging Face model folder has config.json beside its weights"
        )
    with open(path, encoding="utf-8") as f:
        fields = json.load(f)
    if not isinstance(fields, dict):
        raise ArgumentError(f"{path}: expected a JSON object of config fields, got {type(fields).__name__}")
    return fields


def read_weights(folder: Path, device: str | None = None) -> dict[str, Tensor]:
    """Every tensor of model.safetensors, or of each shard model.safetensors.index.json lists, by its name, on
    `device`."""
    index, single = folder / "model.safetensors.index.json", folder / "model.safetensors"
    if index.is_file():
        with open(index, encoding="utf-8") as f:
            shards = json.load(f)
        weight_map = shards.get("weight_map") if isinstance(shards, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ArgumentError(f"{index}: expected a weight_map of tensor names to shard files, got {shards!r:.200}")
        files = sorted(set(weight_map.values()))
    elif single.is_file():
        files = [single.name]
    else:
        torch_files = sorted(p.name for p in folder.glob("*.bin"))
        hint = (
            f" It has {torch_files}, torch's pickles, which limn does not read (they can run code): convert them "
            "with transformers, AutoModelForCausalLM.from_pretrained(folder).save_pretrained(folder)."
            if torch_files
            else ""
        )
        raise FileNotFoundError(f"{folder}: no model.safetensors or model.safetensors.index.json.{hint}")
    weights: dict[str, Tensor] = {}
    for name in files:
        weights.update(load(folder / name, device))
    return weights


def _renamed(
    weights: dict[str, Tensor], layout: Layout, named: dict[str, Tensor], aliases: set[str], folder: Path
) -> dict[str, Tensor]:
    """The file's tensors under the model's parameter names, transposed where the layout says, each checked
    against the parameter's shape; an error lists every tensor missing, left over or misshapen. A tensor under a
    tied weight's second name (`aliases`: GPT-2's lm_head.weight) is the first's, so the file's copy is not read."""
    out: dict[str, Tensor] = {}
    extra: list[str] = []
    for name, array in weights.items():
        if name.endswith(layout.dropped) or name in aliases:
            continue
        if name not in named and layout.prefix + name in named:
            name = layout.prefix + name
        if name not in named:
            extra.append(name)
            continue
        out[name] = array.transpose(0, 1) if name.endswith(layout.transposed) else array
    misshapen = [
        f"{n} {out[n].shape}, the model's {t.shape}" for n, t in named.items() if n in out and out[n].shape != t.shape
    ]
    missing = [n for n in named if n not in out]
    if missing or misshapen or extra:
        problems = [f"missing {missing}" if missing else "", f"misshapen {misshapen}" if misshapen else ""]
        problems.append(f"not in the model {extra}" if extra else "")
        raise ArgumentError(f"{folder}: the checkpoint does not fit its config: " + "; ".join(p for p in problems if p))
    return out
