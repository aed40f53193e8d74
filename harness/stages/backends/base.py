"""What a delegate lane provides. A new delegate is one new module in this package."""

from __future__ import annotations


class QuantUnsupported(Exception):
    """The backend's quantizer has no config for the requested scheme (-> LOWER_ERROR)."""


class Backend:
    name: str = ""
    runtime_name: str = ""  # the name the delegate registers with the ExecuTorch runtime
    # Per-cell tolerance in units of the quantized output's scale (see compare.py).
    quant_tolerance_steps: float = 1.0

    @property
    def quantizer_family(self) -> str:
        """Lanes with the same family quantize a case identically, so it is quantized and
        exported once for all of them (prepare.py). Override when borrowing another's quantizer."""
        return self.name

    def partitioners(self) -> list:
        raise NotImplementedError

    def quantizer(self, scheme: str):
        raise QuantUnsupported(f"{self.name} has no quantizer")

    def contract_violations(self, edge_manager) -> list[str]:
        """Static checks of the serialized delegate payload against the runtime's argument
        contract; each string names one violated rule."""
        return []

    # Whether its runtime reports the compute shaders it dispatches (an ETDump is attached to
    # its executions to read them: execute.py); the others' path is static (code_path).
    observes_dispatch: bool = False

    def code_path(self, edge_manager) -> list[str]:
        """The delegate code paths the lowered program's payload names statically (coverage);
        [] where the path is observed at runtime instead (Vulkan: the dispatched shaders)."""
        return []

    def lowering_context(self):
        """Entered around this lane's lowering (e.g. per-process memos of ExecuTorch internals)."""
        import contextlib

        return contextlib.nullcontext()

    def runtime_available(self) -> bool:
        from harness.runtimes.load import registered_backends

        return self.runtime_name in registered_backends()
