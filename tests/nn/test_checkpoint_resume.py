"""The checkpoint rule: a run stopped at step N and resumed from one safetensors file takes exactly the
trajectory of the uninterrupted run, and its parameters without its optimizer state do not.

The oracle is the uninterrupted run itself, on the same device: the resumed run executes the same
computations on the same values, so losses and parameters must agree bit for bit. The file is read by
the safetensors library too, to pin down what it holds: parameters under named_parameters() paths, the
optimizer's state under `{path}.{state}`, and its scalars (step, lr, beta**t) under `{optimizer}.{name}`.
"""

import numpy as np
import pytest
import safetensors.numpy
from training import training_step

import limn
import limn.nn as nn
import limn.optim as optim
from limn import Tensor, serialize
from limn.capture import capture

DEVICES = ["numpy", "c"]
N, M = 6, 6  # steps before the checkpoint, steps after it
BATCH = 8

_rng = np.random.default_rng(1)
VECTORS = _rng.standard_normal((N + M, BATCH, 4)).astype(np.float32)
IMAGES = _rng.standard_normal((N + M, BATCH, 1, 5, 5)).astype(np.float32)
TARGETS = _rng.standard_normal((N + M, BATCH, 2)).astype(np.float32)


class MLP:
    inputs = VECTORS

    def __init__(self):
        self.fc1 = nn.Linear(4, 12)
        self.fc2 = nn.Linear(12, 2)

    def __call__(self, x):
        return self.fc2(self.fc1(x).relu())  # (B, 4) -> (B, 12) -> (B, 2)


class ConvNet:
    inputs = IMAGES

    def __init__(self):
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.head = nn.Linear(3 * 5 * 5, 2)

    def __call__(self, x):
        h = self.conv(x).relu()  # (B, 1, 5, 5) -> (B, 3, 5, 5)
        return self.head(h.reshape(x.shape[0], -1))  # (B, 75) -> (B, 2)


OPTIMIZERS = {
    "adamw": lambda named: optim.AdamW(named, lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1),
    "sgd": lambda named: optim.SGD(named, lr=0.05, momentum=0.9, weight_decay=1e-3),
}
RUNS = {"mlp-adamw": (MLP, "adamw"), "conv-adamw": (ConvNet, "adamw"), "mlp-sgd": (MLP, "sgd")}


def make(run, seed):
    model_class, opt_kind = RUNS[run]
    limn.manual_seed(seed)
    model = model_class()
    return model, OPTIMIZERS[opt_kind](nn.named_parameters(model))


def train(model, step, steps):
    """(loss, parameters) after each of `steps`, as numpy arrays."""
    out = []
    for s in steps:
        loss = step(Tensor(type(model).inputs[s]), Tensor(TARGETS[s]))
        out.append((loss.numpy(), {name: p.numpy() for name, p in nn.named_parameters(model)}))
    return out


def assert_same_trajectory(got, expected, first_step):
    for s, ((loss, params), (loss_ref, params_ref)) in enumerate(zip(got, expected, strict=True), start=first_step):
        np.testing.assert_array_equal(loss, loss_ref, err_msg=f"loss of step {s + 1}")
        for name in params_ref:
            np.testing.assert_array_equal(params[name], params_ref[name], err_msg=f"{name} after step {s + 1}")


def everything(model, opt):
    """Both halves of a run, as the one dict a checkpoint is saved from and loaded into."""
    return nn.state_dict(model) | opt.state_dict()


@pytest.fixture(params=DEVICES)
def device(request):
    limn.set_device(request.param)
    return request.param


_references: dict[tuple[str, str], tuple] = {}


@pytest.fixture
def reference(device, tmp_path_factory):
    """The uninterrupted run, per device and run kind: its N + M steps, and the file saved after step N."""

    def get(run):
        if (device, run) not in _references:
            model, opt = make(run, seed=0)
            step = training_step(model, opt)
            before = train(model, step, range(N))
            path = tmp_path_factory.mktemp("ckpt") / f"{run}-{device}.safetensors"
            serialize.save(path, everything(model, opt))
            saved = {k: t.numpy() for k, t in everything(model, opt).items()}
            after = train(model, step, range(N, N + M))
            _references[device, run] = (before + after, path, saved)
        return _references[device, run]

    return get


# ---- resuming ----


@pytest.mark.parametrize("run", RUNS)
def test_a_run_resumed_from_one_file_takes_the_uninterrupted_trajectory(device, reference, run):
    trajectory, path, saved = reference(run)
    model, opt = make(run, seed=1)  # a fresh init, overwritten by the file
    first, weight = next(nn.named_parameters(model))
    assert not np.array_equal(weight.numpy(), saved[first])
    serialize.load_into(path, everything(model, opt))
    for key, t in everything(model, opt).items():
        np.testing.assert_array_equal(t.numpy(), saved[key], err_msg=key)
    resumed = train(model, training_step(model, opt), range(N, N + M))
    assert_same_trajectory(resumed, trajectory[N:], first_step=N)


@pytest.mark.parametrize("run", RUNS)
def test_parameters_without_the_optimizer_state_take_another_trajectory(device, reference, run):
    trajectory, path, _ = reference(run)
    model, opt = make(run, seed=1)
    serialize.load_into(path, nn.state_dict(model), strict=False)  # the weights alone: a cold optimizer
    cold = train(model, training_step(model, opt), range(N, N + M))
    # the first loss comes from the weights alone; every update after it reads the optimizer state
    np.testing.assert_array_equal(cold[0][0], trajectory[N][0], err_msg=f"loss of step {N + 1}")
    for s in range(M):
        for name in trajectory[N + s][1]:
            assert not np.array_equal(cold[s][1][name], trajectory[N + s][1][name]), f"{name}, step {N + s + 1}"


def test_adamw_moments_without_beta_powers_take_another_trajectory(device, reference):
    """What beta**t is saved for: moments restored but bias-corrected as if the run had just started."""
    trajectory, path, _ = reference("mlp-adamw")
    model, opt = make("mlp-adamw", seed=1)
    tensors = {k: t for k, t in everything(model, opt).items() if not k.endswith(("beta1_power", "beta2_power"))}
    serialize.load_into(path, tensors, strict=False)
    assert opt.beta1_power.item() == 1.0
    cold = train(model, training_step(model, opt), range(N, N + M))
    assert not np.array_equal(cold[0][1]["fc1.weight"], trajectory[N][1]["fc1.weight"])
    assert not np.array_equal(cold[-1][1]["fc1.weight"], trajectory[-1][1]["fc1.weight"])


def test_a_captured_step_replays_into_the_buffers_load_into_wrote(device, reference):
    trajectory, path, _ = reference("mlp-adamw")
    model, opt = make("mlp-adamw", seed=1)
    step = capture(training_step(model, opt))
    train(model, step, range(2))  # recorded, then replayed once, from the fresh init
    serialize.load_into(path, everything(model, opt))  # mid-run, into the buffers the recording holds
    stats = limn.get_device("c").stats
    built = stats.plans_built
    resumed = train(model, step, range(N, N + M))
    assert step.replays == 1 + M
    assert stats.plans_built == built
    assert_same_trajectory(resumed, trajectory[N:], first_step=N)


# ---- what the file holds ----


STATE = {"adamw": ("exp_avg", "exp_avg_sq"), "sgd": ("momentum_buffer",)}
SCALARS = {"adamw": ("step", "lr", "weight_decay", "beta1_power", "beta2_power"), "sgd": ("step", "lr", "weight_decay")}


@pytest.mark.parametrize("run", ["mlp-adamw", "mlp-sgd"])
def test_the_file_holds_parameter_paths_and_their_state_paths_as_the_library_reads_them(reference, run):
    _, path, saved = reference(run)
    opt_kind = RUNS[run][1]
    model, _ = make(run, seed=0)
    paths = [name for name, _ in nn.named_parameters(model)]
    assert paths == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    expected = set(paths)
    expected |= {f"{p}.{state}" for p in paths for state in STATE[opt_kind]}
    expected |= {f"{opt_kind}.{scalar}" for scalar in SCALARS[opt_kind]}
    read = safetensors.numpy.load_file(str(path))
    assert set(read) == expected
    for key, value in read.items():
        np.testing.assert_array_equal(value, saved[key], err_msg=key)
        assert value.dtype == saved[key].dtype, key
    assert read[f"{opt_kind}.step"] == N and read[f"{opt_kind}.step"].dtype == np.int32
    if opt_kind == "adamw":
        power1, power2 = 1.0, 1.0
        for _ in range(N):
            power1, power2 = power1 * 0.9, power2 * 0.99
        assert read["adamw.beta1_power"].dtype == np.float64
        assert read["adamw.beta1_power"] == power1 and read["adamw.beta2_power"] == power2
