"""Hugging Face checkpoints load into limn models that compute what transformers computes (limn.models):
- tiny random GPT-2 and LLaMA models, built and saved by transformers itself (no download), load from their
  folder, and limn's logits for a batch of sequences are within 1e-4 of transformers' forward, on numpy and c;
- greedy generation of 50 tokens with limn's KV cache gives exactly the tokens transformers' generate gives
  (the test models' top two logits are checked apart by more than the logits' tolerance at every step, so the
  oracle is not a coin toss);
- the layout table's cases: a base model's files (no `transformer.` prefix, GPT-2's old causal-mask buffers),
  sharded files with an index, a tied head, grouped-query attention, Llama 3's rotary rescaling, attention biases,
  Qwen2's biases on q, k and v, Mistral's sliding window (served up to the window), a bfloat16 checkpoint loaded
  in float32;
- a folder that is not a checkpoint, a family limn does not build, a tensor of the wrong shape and a bad prompt
  are refused with errors that name them.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.errors import ArgumentError
from limn.models import from_pretrained, generate
from limn.serialize import load_numpy, save

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB = 97
GENERATED = 50


def _gpt2(**overrides):
    fields = dict(vocab_size=VOCAB, n_positions=96, n_embd=32, n_layer=2, n_head=4, initializer_range=0.3)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**(fields | overrides)))


def _llama(family: str = "Llama", **overrides):
    fields = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=96,
        initializer_range=0.3,
    )
    config = getattr(transformers, f"{family}Config")(**(fields | overrides))
    return getattr(transformers, f"{family}ForCausalLM")(config)


LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}
MODELS = {
    "gpt2": lambda: _gpt2(),
    "llama": lambda: _llama(),
    "llama3-rope-tied-bias": lambda: _llama(rope_parameters=LLAMA3_ROPE, tie_word_embeddings=True, attention_bias=True),
    "qwen2": lambda: _llama("Qwen2", tie_word_embeddings=True),
    "mistral-window": lambda: _llama("Mistral", sliding_window=64, head_dim=8),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> (the transformers model, the folder save_pretrained wrote it to)."""
    out = {}
    for seed, (name, make) in enumerate(MODELS.items()):
        torch.manual_seed(seed)
        model = make().eval()
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        out[name] = (model, folder)
    return out


def _ids(batch: int, length: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, length)).astype(np.int32)


def _logits(model, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(ids, dtype=torch.long)).logits.float().numpy()


def _limn_logits(model, ids: np.ndarray) -> np.ndarray:
    with limn.no_grad():
        return model(Tensor(ids)).numpy()


@pytest.mark.parametrize("name", list(MODELS))
def test_logits_match_transformers_forward(name, saved, device):
    reference, folder = saved[name]
    ids = _ids(3, 23)
    got, want = _limn_logits(from_pretrained(folder), ids), _logits(reference, ids)
    err = np.abs(got - want).max()
    assert err <= 1e-4, f"{name} on {device}: logits differ by {err:.3g} (reproduce: from_pretrained({folder}))"


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_generation_matches_transformers(name, saved, device):
    reference, folder = saved[name]
    prompt = _ids(1, 7, seed=1)
    with torch.no_grad():
        out = reference.generate(
            torch.tensor(prompt, dtype=torch.long),
            max_new_tokens=GENERATED,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    want = out.sequences[0, prompt.shape[1] :].tolist()
    top2 = [torch.topk(s[0], 2).values for s in out.scores]
    # apart by more than the logits' tolerance, limn's argmax is transformers' wherever the logits agree
    assert min(float(a - b) for a, b in top2) > 1e-4, "the test model has a near tie: pick another seed"
    assert len(set(want)) >= 5, f"the test model repeats itself ({want}): it would not tell generators apart"
    got = generate(from_pretrained(folder), prompt[0].tolist(), GENERATED)
    assert got == want, f"{name} on {device}:\nlimn         {got}\ntransformers {want}"


def test_a_base_models_files_and_old_mask_buffers_load(saved, tmp_path):
    reference, folder = saved["gpt2"]
    weights = load_numpy(folder / "model.safetensors")
    base = {name.removeprefix("transformer."): array for name, array in weights.items()}
    base["h.0.attn.bias"] = np.tril(np.ones((1, 1, 96, 96), np.float32))  # what older GPT-2 files carry
    base["lm_head.weight"] = weights["transformer.wte.weight"]  # a tied head written out
    save(tmp_path / "model.safetensors", base)
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    ids = _ids(2, 9)
    np.testing.assert_allclose(_limn_logits(from_pretrained(tmp_path), ids), _logits(reference, ids), atol=1e-4)


def test_sharded_files_load(saved, tmp_path):
    reference, _ = saved["llama"]
    reference.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file() and len(list(tmp_path.glob("*.safetensors"))) > 2
    ids = _ids(2, 9)
    np.testing.assert_allclose(_limn_logits(from_pretrained(tmp_path), ids), _logits(reference, ids), atol=1e-4)


def test_a_bfloat16_checkpoint_loads_in_float32(saved, tmp_path):
    reference, _ = saved["llama"]
    half = _llama()
    half.load_state_dict(reference.state_dict())
    half.to(torch.bfloat16).save_pretrained(tmp_path)
    rounded = _llama().eval()  # float32, with the weights the file holds (its rotary frequencies not rounded)
    rounded.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in reference.state_dict().items()})
    ids = _ids(2, 9)
    model = from_pretrained(tmp_path)
    assert model.lm_head.weight.dtype == limn.float32
    np.testing.assert_allclose(_limn_logits(model, ids), _logits(rounded, ids), atol=1e-4)


def test_what_is_not_a_checkpoint_is_refused_by_name(saved, tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"pytorch_model.bin.*save_pretrained"):
        from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(ArgumentError, match="model_type 't5'.*'gpt2', 'llama'"):
        from_pretrained(tmp_path)


def test_a_checkpoint_that_does_not_fit_its_config_names_the_tensors(saved, tmp_path):
    _, folder = saved["gpt2"]
    weights = load_numpy(folder / "model.safetensors")
    weights["transformer.h.1.mlp.c_fc.weight"] = weights["transformer.h.1.mlp.c_fc.weight"][:, :64]
    del weights["transformer.ln_f.bias"]
    weights["transformer.h.9.ln_1.weight"] = weights["transformer.ln_f.weight"]
    save(tmp_path / "model.safetensors", weights)
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(ArgumentError) as caught:
        from_pretrained(tmp_path)
    for piece in ["missing ['transformer.ln_f.bias']", "transformer.h.1.mlp.c_fc.weight (64, 32)", "h.9.ln_1.weight"]:
        assert piece in str(caught.value), str(caught.value)


BAD_CALLS = [
    (dict(prompt=[]), "1 or more"),
    (dict(prompt=[VOCAB]), r"\[0, 97\)"),
    (dict(prompt=[1.7]), "int token ids"),
    (dict(prompt="12"), "encode text"),
    (dict(prompt=[True]), "int token ids"),
    (dict(prompt=[1] * 90, max_new_tokens=7), "the 96 positions"),
    (dict(max_new_tokens=2.0), "max_new_tokens must be an int"),
    (dict(max_new_tokens=-1), "max_new_tokens must be an int"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(temperature=-0.5), "temperature"),
    (dict(temperature=1.0, top_k=2.5), "top_k an int"),
    (dict(temperature=1.0, top_k=0), "top_k an int"),
]


@pytest.mark.parametrize("bad, match", BAD_CALLS, ids=[str(b) for b, _ in BAD_CALLS])
def test_bad_generate_arguments_are_refused(saved, bad, match):
    model = from_pretrained(saved["gpt2"][1])
    call = dict(prompt=[1, 2], max_new_tokens=3) | bad
    with pytest.raises(ArgumentError, match=match):
        generate(model, call.pop("prompt"), call.pop("max_new_tokens"), **call)


def test_bad_forward_inputs_are_refused(saved):
    model = from_pretrained(saved["gpt2"][1])
    with pytest.raises(ArgumentError, match="positions for 96"):
        model(Tensor(np.zeros((1, 97), np.int32)))
    with pytest.raises(ArgumentError, match=r"\(B, T\) int token ids"):
        model(Tensor(np.zeros((5,), np.int32)))
    with pytest.raises(ArgumentError, match=r"\(B, T\) int token ids"):
        model(Tensor(np.zeros((1, 5), np.float32)))


def test_sampling_is_the_same_for_a_seed(saved):
    model = from_pretrained(saved["llama"][1])
    first = generate(model, [3, 1, 4], 12, temperature=0.8, top_k=20, seed=5)
    assert generate(model, [3, 1, 4], 12, temperature=0.8, top_k=20, seed=5) == first
    assert generate(model, [3, 1, 4], 12, temperature=0.8, top_k=20, seed=6) != first


def test_a_sliding_window_caps_the_positions_served(saved):
    model = from_pretrained(saved["mistral-window"][1])
    assert model.context == 64
    with pytest.raises(ArgumentError, match="the 64 positions"):
        generate(model, [1, 2, 3], 62)


def test_an_untied_gpt2_head_is_its_own_tensor(tmp_path):
    torch.manual_seed(7)
    reference = _gpt2(tie_word_embeddings=False).eval()
    reference.save_pretrained(tmp_path)
    model = from_pretrained(tmp_path)
    assert model.lm_head.weight is not model.transformer.wte.weight
    ids = _ids(2, 9)
    np.testing.assert_allclose(_limn_logits(model, ids), _logits(reference, ids), atol=1e-4)


BAD_CONFIGS = [
    ("gpt2", {"n_head": "4"}, "n_head must be an int"),
    ("gpt2", {"n_head": 0}, "n_head must be an int"),
    ("gpt2", {"n_head": 5}, "multiple of n_head"),
    ("gpt2", {"layer_norm_epsilon": None}, "layer_norm_epsilon must be a number"),
    ("gpt2", {"model_type": ["gpt2"]}, "model_type"),
    ("gpt2", {"model_type": "llama"}, "does not fit its config"),  # llama's 7B defaults: refused, nothing allocated
    ("llama", {"rope_theta": None, "rope_parameters": None}, "rope_theta"),
    ("llama", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5}}, "needs factor"),
    ("llama", {"num_key_value_heads": 3}, "multiple of num_key_value_heads"),
    ("llama", {"hidden_act": "tanh_fancy"}, "activation"),
]


@pytest.mark.parametrize("family, change, match", BAD_CONFIGS, ids=[f"{f}-{m}" for f, _, m in BAD_CONFIGS])
def test_a_config_that_cannot_build_the_model_is_refused_by_field(saved, tmp_path, family, change, match):
    folder = saved[family][1]
    fields = json.loads((folder / "config.json").read_text()) | change
    (tmp_path / "config.json").write_text(json.dumps(fields))
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(ArgumentError, match=match):
        from_pretrained(tmp_path)


def test_an_index_without_a_weight_map_is_refused(saved, tmp_path):
    (tmp_path / "config.json").write_text((saved["gpt2"][1] / "config.json").read_text())
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}}))
    with pytest.raises(ArgumentError, match="weight_map"):
        from_pretrained(tmp_path)


def test_generation_stops_where_generation_config_says(saved, tmp_path):
    model = from_pretrained(saved["llama"][1])
    free = generate(model, [3, 1, 4], 12, eos_token_id=[])
    stop = free[4]
    folder = tmp_path / "stops"
    shutil.copytree(saved["llama"][1], folder)
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [VOCAB - 1, stop]}))
    assert generate(from_pretrained(folder), [3, 1, 4], 12) == free[: free.index(stop) + 1]


def test_context_caps_the_positions_of_either_family(saved):
    for name in ("gpt2", "llama"):
        model = from_pretrained(saved[name][1], context=20)
        assert model.context == 20 and model.caches()[0].length == 20
    with pytest.raises(ArgumentError, match="context must be an int of at least 1"):
        from_pretrained(saved["gpt2"][1], context=0)


@pytest.mark.ops
def test_a_model_loaded_on_c_samples_without_setting_the_device(saved):
    limn.set_device("numpy")
    model = from_pretrained(saved["llama"][1], device="c")
    first = generate(model, [3, 1, 4], 8, temperature=1.0, top_k=5, seed=2)
    assert first == generate(model, [3, 1, 4], 8, temperature=1.0, top_k=5, seed=2) and len(first) == 8
