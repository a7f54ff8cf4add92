"""The ctx of a custom torch.autograd.Function while tcjit traces its
forward (src/tracer/autofn.c).

The tracer inlines `cls.forward(ctx, *args)` (and `cls.setup_context`)
only for a call that records no autograd graph: grad mode is off, or no
tensor argument requires grad.  Then nothing ever reads what forward
stores on ctx (there is no backward), so ctx is a plain object the
tracer makes and drops: its methods only record their arguments, which
the tracer looks at afterwards (mark_dirty changes eager's results).
"""


class TracedFunctionCtx:
    def __init__(self, needs_input_grad):
        # as eager's: one bool per argument, a tensor's requires_grad
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        self.materialize_grads = value

    def mark_dirty(self, *args):
        self.dirty_tensors = args
