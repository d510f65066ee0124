"""Rule: explain on an optimizer step names the assign rule for every state it updates (each parameter, and
AdamW's two moments and step count) and the user's line that asked for the update, through the optimizer's
own code; the gradients it reads come from the forward lines. Oracle: the optimizer's state list and this
file's line numbers."""

import inspect

from limn import Tensor, nn, optim
from limn.compiler.explain import explain
from limn.graph import provenance


def marked_line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    (hit,) = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# line: {marker}")]
    return hit


def adamw_step(model, opt, x):
    loss = model(x).square().mean()  # line: loss
    loss.backward()
    return opt.updates()  # line: updates


def test_an_adamw_step_stores_each_update_by_the_assign_rule_from_the_updates_line():
    model = nn.Linear(4, 3)
    opt = optim.AdamW(nn.parameters(model), lr=1e-2)
    with provenance.recording():
        updates = adamw_step(model, opt, Tensor.randn((5, 4)))
    e = explain(*updates)
    targets = {e.schedule.sinks[i].slot for i in range(len(updates))}  # each update writes its state's buffer
    storing = [(k, st) for k in e.kernels for st in k.stores if st.slot in targets]
    assert {st.slot for _, st in storing} == targets, e.brief()
    line = marked_line(adamw_step, "updates")
    for k, st in storing:
        assert st.rule == "op" and "ASSIGN" in st.reason, f"{st}\n{e.brief()}"
        assert line in {s.line for s in k.sites if not s.backward}, f"{k}\nexpected line {line}"
        assert any("updates" in s.api for s in k.sites), k
    backward = {s.line for k in e.kernels for s in k.sites if s.backward}
    assert backward == {marked_line(adamw_step, "loss")}, e.brief()
