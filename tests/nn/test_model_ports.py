"""Two models ported from torch as a user would write them, trained against torch step for step (issue 12):
nanoGPT's model.py (token and position embeddings, pre-LayerNorm blocks of its own LayerNorm of nn.Parameter
and F.layer_norm, causal self-attention by masked_fill(-inf) and softmax, an nn.GELU MLP, lm_head tied to
wte, ignore_index=-1) with its configure_optimizers' two AdamW groups, clip_grad_norm_ and train.py's
warmup-cosine learning rate set in param_groups each step; and a small U-Net (conv + BatchNorm + relu blocks,
max_pool2d down, up by ConvTranspose2d and by bilinear interpolate, skips by cat, GroupNorm, Dropout2d, a 1x1
head) with SGD momentum. torch's initial weights load strictly into limn; every step's loss, the weights after
the last, the BatchNorm running stats and the logits in eval() after training must agree.
"""

import math

import numpy as np
import torch

import limn
import limn.nn as nn
import limn.nn.functional as F
import limn.optim as optim
from limn import Tensor


def _close(ours, theirs, what, rtol, atol):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol, err_msg=what)


def _load_torchs_weights(model, torch_model):
    """torch's state_dict into limn's, strictly: the names, the tied weight and the buffers must agree."""
    missing, unexpected = model.load_state_dict({k: v.numpy() for k, v in torch_model.state_dict().items()})
    assert missing == unexpected == []


# ---- nanoGPT, as model.py writes it (bias=False, dropout=0.0: its train_shakespeare_char settings) ----

VOCAB, BLOCK, EMBD, HEADS, LAYERS, BATCH = 29, 16, 32, 4, 2, 4


class LayerNorm(nn.Module):
    """LayerNorm but with an optional bias (nanoGPT's own, torch's LayerNorm had no bias=False then)."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(Tensor.ones(ndim))
        self.bias = nn.Parameter(Tensor.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(EMBD, 3 * EMBD, bias=False)
        self.c_proj = nn.Linear(EMBD, EMBD, bias=False)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.0), nn.Dropout(0.0)
        self.register_buffer("bias", Tensor.ones(BLOCK, BLOCK).tril().view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(EMBD, dim=2)  # (B, T, 3C) -> 3 x (B, T, C)
        k = k.view(B, T, HEADS, C // HEADS).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        v = v.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        # nanoGPT's slow path (its flash path, F.scaled_dot_product_attention, is tests/core/test_sdpa.py's):
        # the masked softmax written out, so the port trains every primitive of it
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(EMBD, 4 * EMBD, bias=False)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * EMBD, EMBD, bias=False)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = LayerNorm(EMBD, bias=False), CausalSelfAttention()
        self.ln_2, self.mlp = LayerNorm(EMBD, bias=False), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(VOCAB, EMBD),
                wpe=nn.Embedding(BLOCK, EMBD),
                drop=nn.Dropout(0.0),
                h=nn.ModuleList([Block() for _ in range(LAYERS)]),
                ln_f=LayerNorm(EMBD, bias=False),
            )
        )
        self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * LAYERS))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        b, t = idx.size()
        pos = Tensor.arange(0, t, dtype=limn.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))  # (b, t, C)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))  # (b, t, vocab)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        return optim.AdamW(optim_groups, lr=learning_rate, betas=betas)


class TorchCausalSelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = torch.nn.Linear(EMBD, 3 * EMBD, bias=False)
        self.c_proj = torch.nn.Linear(EMBD, EMBD, bias=False)
        self.attn_dropout, self.resid_dropout = torch.nn.Dropout(0.0), torch.nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(EMBD, dim=2)
        k = k.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        q = q.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        v = v.view(B, T, HEADS, C // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(torch.nn.functional.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class TorchMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = torch.nn.Linear(EMBD, 4 * EMBD, bias=False)
        self.gelu = torch.nn.GELU()
        self.c_proj = torch.nn.Linear(4 * EMBD, EMBD, bias=False)
        self.dropout = torch.nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class TorchBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = torch.nn.LayerNorm(EMBD, bias=False), TorchCausalSelfAttention()
        self.ln_2, self.mlp = torch.nn.LayerNorm(EMBD, bias=False), TorchMLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.ModuleDict(
            dict(
                wte=torch.nn.Embedding(VOCAB, EMBD),
                wpe=torch.nn.Embedding(BLOCK, EMBD),
                drop=torch.nn.Dropout(0.0),
                h=torch.nn.ModuleList([TorchBlock() for _ in range(LAYERS)]),
                ln_f=torch.nn.LayerNorm(EMBD, bias=False),
            )
        )
        self.lm_head = torch.nn.Linear(EMBD, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for name, p in self.named_parameters():  # nanoGPT's init, so the weights are a GPT's, not torch's defaults
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02 / math.sqrt(2 * LAYERS) if name.endswith("c_proj.weight") else 0.02)

    def forward(self, idx, targets):
        t = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(0, t, dtype=torch.long))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


def get_lr(it, learning_rate=1e-3, warmup_iters=2, lr_decay_iters=4, min_lr=1e-4):
    """nanoGPT's train.py schedule: linear warmup, then cosine decay down to min_lr."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
    return min_lr + coeff * (learning_rate - min_lr)


def _gpt_batch(rng):
    data = rng.integers(0, VOCAB, (BATCH, BLOCK + 1))
    x, y = data[:, :-1], data[:, 1:].copy()
    y[0, :3] = -1  # ignore_index: some targets left out of the loss, as a padded batch has
    return x, y


def test_nanogpt_trains_4_adamw_steps_as_torch(device):
    """Tolerances: float32 both sides, summed in other orders (torch's matmuls block their sums, limn's
    kernels sum in their own), so each step's values differ in the last bits. The loss, a mean of 61 terms,
    within rtol 1e-6 (measured: up to 2.1e-7, 3 ulps, on c); the gradient norm the same (measured 2.1e-7). Adam's
    first steps move each weight by about lr whatever its gradient's size, so the weights (~0.02, moved by
    up to 4 * lr <= 4e-3) keep those bits: atol 1e-6 (measured: up to 4e-7). bias=False, nanoGPT's
    train_shakespeare_char setting: with a c_attn bias the key bias's gradient is 0 in exact arithmetic (softmax
    ignores a shift of a query's scores), so each framework's is float noise, and Adam divides that noise by
    sqrt(v) + eps, about its own size: the key bias then differs by 5e-6 after 4 steps (measured; the query and
    value biases by 1.5e-8), noise compared with noise."""
    torch.manual_seed(0)
    theirs = TorchGPT()
    model = GPT()
    _load_torchs_weights(model, theirs)
    assert model.lm_head.weight is model.transformer.wte.weight  # the tie survives load_state_dict
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95))
    torch_optimizer = theirs.configure_optimizers(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95))
    sizes = [len(g["params"]) for g in torch_optimizer.param_groups]  # [10, 5]: 2-d weights, LayerNorms
    assert [len(g["params"]) for g in optimizer.param_groups] == sizes == [10, 5]
    rng = np.random.default_rng(1)
    for step in range(4):
        for opt in (optimizer, torch_optimizer):  # as train.py sets each step's learning rate
            for param_group in opt.param_groups:
                param_group["lr"] = get_lr(step)
        x, y = _gpt_batch(rng)
        logits, loss = model(Tensor(x), Tensor(y))
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

        _, torch_loss = theirs(torch.from_numpy(x), torch.from_numpy(y))
        torch_loss.backward()
        torch_norm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        torch_optimizer.step()
        torch_optimizer.zero_grad(set_to_none=True)

        # read after the step, as a training loop logs: the loss and norm are of the weights before it
        _close(loss, torch_loss, f"loss at step {step}", rtol=1e-6, atol=0)
        _close(norm, torch_norm, f"gradient norm at step {step}", rtol=1e-6, atol=0)
    for name, p in model.named_parameters():
        _close(p, theirs.get_parameter(name), f"{name} after 4 steps", rtol=0, atol=1e-6)


# ---- a U-Net: two levels down by max_pool2d, up by ConvTranspose2d and by bilinear interpolate ----


class DoubleConv(nn.Module):
    """(conv 3x3 -> norm -> relu) twice; norm is BatchNorm2d, or GroupNorm where groups is given."""

    def __init__(self, in_ch, out_ch, groups=None):
        super().__init__()
        norm = (lambda: nn.GroupNorm(groups, out_ch)) if groups else (lambda: nn.BatchNorm2d(out_ch))
        self.conv1, self.norm1 = nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False), norm()
        self.conv2, self.norm2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False), norm()

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(x)))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inc = DoubleConv(2, 4)
        self.down1 = DoubleConv(4, 8)
        self.down2 = DoubleConv(8, 16, groups=4)
        self.drop = nn.Dropout2d(0.25)
        self.up1 = nn.ConvTranspose2d(16, 8, kernel_size=2, stride=2)
        self.conv_up1 = DoubleConv(16, 8)
        self.conv_up2 = DoubleConv(12, 4)
        self.head = nn.Conv2d(4, 1, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)  # (N, 4, 16, 16)
        x2 = self.down1(F.max_pool2d(x1, 2))  # (N, 8, 8, 8)
        x3 = self.drop(self.down2(F.max_pool2d(x2, 2)))  # (N, 16, 4, 4)
        y = self.conv_up1(Tensor.cat([x2, self.up1(x3)], dim=1))  # (N, 8 + 8, 8, 8) -> (N, 8, 8, 8)
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)  # (N, 8, 16, 16)
        y = self.conv_up2(Tensor.cat([x1, y], dim=1))  # (N, 4 + 8, 16, 16) -> (N, 4, 16, 16)
        return self.head(y)  # (N, 1, 16, 16) logits


class TorchDoubleConv(torch.nn.Module):
    def __init__(self, in_ch, out_ch, groups=None):
        super().__init__()
        tnn = torch.nn
        norm = (lambda: tnn.GroupNorm(groups, out_ch)) if groups else (lambda: tnn.BatchNorm2d(out_ch))
        self.conv1, self.norm1 = tnn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False), norm()
        self.conv2, self.norm2 = tnn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False), norm()

    def forward(self, x):
        x = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(self.norm2(self.conv2(x)))


class TorchUNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inc, self.down1, self.down2 = TorchDoubleConv(2, 4), TorchDoubleConv(4, 8), TorchDoubleConv(8, 16, 4)
        self.drop = torch.nn.Dropout2d(0.25)
        self.up1 = torch.nn.ConvTranspose2d(16, 8, kernel_size=2, stride=2)
        self.conv_up1, self.conv_up2 = TorchDoubleConv(16, 8), TorchDoubleConv(12, 4)
        self.head = torch.nn.Conv2d(4, 1, kernel_size=1)

    def forward(self, x):
        tf = torch.nn.functional
        x1 = self.inc(x)
        x2 = self.down1(tf.max_pool2d(x1, 2))
        x3 = self.drop(self.down2(tf.max_pool2d(x2, 2)))
        y = self.conv_up1(torch.cat([x2, self.up1(x3)], dim=1))
        y = tf.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(self.conv_up2(torch.cat([x1, y], dim=1)))


def test_unet_trains_3_sgd_momentum_steps_as_torch(device):
    """BatchNorm trains (batch statistics, running stats updated), Dropout2d is in eval: a p > 0 mask in
    training draws from each framework's own generator, so no two masks agree. Tolerances: float32 sums in
    other orders. The loss is a mean of 512 terms: rtol 2e-6 (measured: up to 5.9e-7 on c, 7 ulps of 0.7; a
    sum of n float32 terms in another order moves by ~sqrt(n) ulps). Weights (~0.3) and running stats after
    3 steps, and the eval() logits after them: atol 1e-6 (measured: up to 7.5e-8)."""
    torch.manual_seed(1)
    theirs = TorchUNet()
    model = UNet()
    _load_torchs_weights(model, theirs)
    model.drop.eval()  # the dropout alone: model.eval() would put the BatchNorms in eval too
    theirs.drop.eval()
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    torch_optimizer = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    rng = np.random.default_rng(2)
    for step in range(3):
        x = rng.standard_normal((2, 2, 16, 16)).astype(np.float32)
        target = (x[:, :1] + x[:, 1:] > 0).astype(np.float32)  # (2, 1, 16, 16) a mask to segment
        loss = F.binary_cross_entropy_with_logits(model(Tensor(x)), Tensor(target))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

        torch_loss = torch.nn.functional.binary_cross_entropy_with_logits(
            theirs(torch.from_numpy(x)), torch.from_numpy(target)
        )
        torch_loss.backward()
        torch_optimizer.step()
        torch_optimizer.zero_grad()
        _close(loss, torch_loss, f"loss at step {step}", rtol=2e-6, atol=0)
    for name, p in model.named_parameters():
        _close(p, theirs.get_parameter(name), f"{name} after 3 steps", rtol=0, atol=1e-6)
    buffers = dict(theirs.named_buffers())
    assert len(buffers) == 3 * 8  # 8 BatchNorm2d: running_mean, running_var, num_batches_tracked
    for name, t in model.state_dict().items():
        if name.endswith(("running_mean", "running_var")):
            _close(t, buffers[name], f"{name} after 3 steps", rtol=0, atol=1e-6)
        elif name.endswith("num_batches_tracked"):
            assert t.dtype == limn.int64 and t.item() == buffers[name].item() == 3, name
    # then validation, as a training script ends: eval() everywhere, BatchNorm on its running stats
    model.eval()
    theirs.eval()
    x = rng.standard_normal((2, 2, 16, 16)).astype(np.float32)
    with limn.no_grad(), torch.no_grad():
        _close(model(Tensor(x)), theirs(torch.from_numpy(x)), "eval logits after 3 steps", rtol=0, atol=1e-6)
