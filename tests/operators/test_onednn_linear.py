"""oneDNN dense products: values and gradients against F.linear."""

import pytest
import torch
import torch.nn.functional as F

from strata.operators.kernels.onednn_linear import (
    dense_on_onednn,
    onednn_addmm,
    onednn_available,
    onednn_linear,
)

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="torch without oneDNN")


def _grads(fn, *tensors):
    out = fn(*tensors)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    grads = [t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    return out.detach(), grads


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(37, 24), (3, 5, 24)])
def test_values_and_gradients_match_f_linear(bias, shape):
    torch.manual_seed(0)
    x = torch.randn(*shape, requires_grad=True)
    w = torch.randn(9, 24, requires_grad=True)
    b = torch.randn(9, requires_grad=True) if bias else None
    tensors = [t for t in (x, w, b) if t is not None]

    def call(f):
        return lambda *t: f(t[0], t[1], t[2] if bias else None)

    got, got_grads = _grads(call(onednn_linear), *tensors)
    want, want_grads = _grads(call(F.linear), *tensors)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for g, h in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, h, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_mode_routes_layers_and_only_float32_cpu():
    torch.manual_seed(1)
    layer = torch.nn.Linear(6, 4)
    x = torch.randn(10, 6)
    with dense_on_onednn():
        y = layer(x)
        y64 = layer.double()(x.double())  # float64: F.linear itself
    assert type(y.grad_fn).__name__ == "_LinearBackward"
    assert type(y64.grad_fn).__name__ == "AddmmBackward0"
    torch.testing.assert_close(y64.float(), y, rtol=1e-5, atol=1e-5)


def test_falls_back_outside_the_cpu_float32_case():
    x, w = (
        torch.randn(4, 3, dtype=torch.float64),
        torch.randn(2, 3, dtype=torch.float64),
    )
    torch.testing.assert_close(onednn_linear(x, w), F.linear(x, w))


@needs_onednn
def test_addmm_values_and_gradients_match_torch():
    torch.manual_seed(2)
    c = torch.randn(33, 7, requires_grad=True)
    a = torch.randn(33, 12, requires_grad=True)
    w = torch.randn(7, 12, requires_grad=True)  # b = w.t(), as a layer passes it
    got, got_grads = _grads(lambda c, a, w: onednn_addmm(c, a, w.t()), c, a, w)
    want, want_grads = _grads(lambda c, a, w: torch.addmm(c, a, w.t()), c, a, w)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for g, h in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, h, rtol=1e-5, atol=1e-5)
    with dense_on_onednn():
        routed = torch.addmm(c, a, w.t())
        scaled = torch.addmm(c, a, w.t(), beta=0.5)  # not routed: beta != 1
    assert type(routed.grad_fn).__name__ == "_AddMMBackward"
    assert type(scaled.grad_fn).__name__ == "AddmmBackward0"
