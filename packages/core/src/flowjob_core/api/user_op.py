"""``flow.user_op_builder``: legacy's generic way to add any registered op to the job being traced.

    y = (flow.user_op_builder("my_swish").Op("swish").Input("x", [x]).Output("out")
         .Attr("beta", 1.0).Build().InferAndTryRun().SoleOutputBlob())

Legacy ran C++ user ops loaded with ``flow.config.load_library``; here the op is any record a
plugin registered (``flowjob_add_ops``), so its inference, gradient rule and kernel apply as for
the op's own function. Named inputs and attributes map onto the record's positional inputs and
attribute dict through ``OpDef.legacy.input_names`` / ``OpDef.legacy.attr_names`` when the record declares them
(unknown names are errors naming the op); otherwise inputs keep the order of the ``Input`` calls.
Outputs are the record's, in order (lbns ``<name>/<record output name>``); ``Output(name, num)``
calls, when given, must add up to that count.
"""
from __future__ import annotations

import difflib
from typing import Any, Sequence

from flowjob_core.trace.blob import Blob
from flowjob_core.errors import FlowjobError, OpBuildError
from flowjob_core.ir import naming
from flowjob_core.ir.opdef import OpDef
from flowjob_core.trace.builder import JobBuilder, current_builder, user_source


class UserOp:
    """A built op: ``InferAndTryRun()`` adds it to the job; then its output blobs."""

    def __init__(self, conf: "UserOpConfBuilder") -> None:
        self._conf = conf
        self._outputs: tuple[Blob, ...] | None = None

    def InferAndTryRun(self) -> "UserOp":  # noqa: N802 (legacy method names)
        """Add the node and run the op's inference (errors name the job, op and the user's line)."""
        if self._outputs is not None:
            raise OpBuildError(f"{self._conf.what}: InferAndTryRun was already called; build a new op to add another")
        self._outputs = self._conf.add_node()
        return self

    def RemoteBlobList(self) -> tuple[Blob, ...]:  # noqa: N802
        """The op's output blobs, in order."""
        if self._outputs is None:
            raise OpBuildError(f"{self._conf.what}: call InferAndTryRun() before asking for its output blobs")
        return self._outputs

    def RemoteBlobDict(self) -> dict[str, list[Blob]]:  # noqa: N802
        """Output blobs by the names given to ``Output`` (in call order, ``num`` each)."""
        blobs, result, start = self.RemoteBlobList(), {}, 0
        for name, num in self._conf.outputs:
            result[name] = list(blobs[start:start + num])
            start += num
        return result

    def SoleOutputBlob(self) -> Blob:  # noqa: N802
        """The one output blob (an error when the op has another count)."""
        blobs = self.RemoteBlobList()
        if len(blobs) != 1:
            raise OpBuildError(f"{self._conf.what}: SoleOutputBlob needs exactly one output, the op has {len(blobs)}")
        return blobs[0]


class UserOpConfBuilder:
    """``Op``, ``Input``, ``Output``, ``Attr``, ``SetRandomSeed``, then ``Build``; each returns the builder."""

    def __init__(self, op_name: str) -> None:
        if not isinstance(op_name, str) or not op_name:
            raise OpBuildError(f"flow.user_op_builder: op_name must be a non-empty str, got {op_name!r}")
        self.op_name = op_name
        self.op_type: str | None = None
        self.inputs: list[tuple[str, list[Blob]]] = []
        self.outputs: list[tuple[str, int]] = []
        self.attrs: dict[str, Any] = {}
        self._builder = current_builder(f"flow.user_op_builder({op_name!r})")
        self._source = user_source(2)

    @property
    def what(self) -> str:
        op = f" ({self.op_type})" if self.op_type else ""
        return f"job {self._builder.job.name!r}, user op {self.op_name!r}{op} at {self._source}"

    def Op(self, op_type_name: str) -> "UserOpConfBuilder":  # noqa: N802
        """The registered op type to add (any plugin's)."""
        if not isinstance(op_type_name, str) or not op_type_name:
            raise OpBuildError(f"{self.what}: Op() needs the op type name as a str, got {op_type_name!r}")
        self.op_type = op_type_name
        # an unknown op type is named here, with the registered ones; a legacy name becomes the record's
        self.op_type = self._opdef().name
        return self

    def Input(self, input_name: str, input_blob_list: Sequence[Blob]) -> "UserOpConfBuilder":  # noqa: N802
        """Blobs for the input argument ``input_name`` (a list: legacy arguments may take several)."""
        if not isinstance(input_name, str) or not input_name:
            raise OpBuildError(f"{self.what}: an input name must be a non-empty str, got {input_name!r}")
        if not isinstance(input_blob_list, (list, tuple)):
            raise OpBuildError(f"{self.what}: Input({input_name!r}, ...) takes a list of blobs, "
                               f"got {type(input_blob_list).__name__}")
        if self.op_type:
            input_name = self._input_name(self._opdef(), input_name)
        if any(name == input_name for name, _ in self.inputs):
            raise OpBuildError(f"{self.what}: input {input_name!r} is given twice")
        self._check_name("input", input_name, self._opdef().legacy.input_names if self.op_type else None)
        self.inputs.append((input_name, list(input_blob_list)))
        return self

    def Output(self, output_name: str, num: int = 1) -> "UserOpConfBuilder":  # noqa: N802
        """Declare ``num`` outputs under ``output_name``; the counts must add up to the op's outputs."""
        if not isinstance(output_name, str) or not output_name:
            raise OpBuildError(f"{self.what}: an output name must be a non-empty str, got {output_name!r}")
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise OpBuildError(f"{self.what}: Output({output_name!r}, num=...) needs an int >= 1, got {num!r}")
        if any(name == output_name for name, _ in self.outputs):
            raise OpBuildError(f"{self.what}: output {output_name!r} is given twice")
        self.outputs.append((output_name, num))
        return self

    def Attr(self, attr_name: str, attr_value: Any, attr_type_name: str | None = None) -> "UserOpConfBuilder":  # noqa: N802
        """Set an attribute. ``attr_type_name`` (legacy ``"AttrTypeInt64"`` ...) was deprecated in v0.4: the
        value carries its type, so the name is accepted and not needed."""
        if not isinstance(attr_name, str) or not attr_name:
            raise OpBuildError(f"{self.what}: an attribute name must be a non-empty str, got {attr_name!r}")
        if attr_type_name is not None and not isinstance(attr_type_name, str):
            raise OpBuildError(f"{self.what}: attr_type_name must be a str or None, got {attr_type_name!r}")
        self._check_name("attribute", attr_name, self._opdef().legacy.attr_names if self.op_type else None)
        self.attrs[attr_name] = tuple(attr_value) if isinstance(attr_value, list) else attr_value
        return self

    def SetRandomSeed(self, seed: int | None = None) -> "UserOpConfBuilder":  # noqa: N802
        """A fixed ``seed`` attribute; None leaves the op's draws random (a fresh seed per session)."""
        if seed is None:
            return self
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise OpBuildError(f"{self.what}: SetRandomSeed needs an int or None, got {seed!r}")
        return self.Attr("seed", seed)

    def Build(self) -> UserOp:  # noqa: N802
        """Check the configuration is complete (the op type set); the node is added by ``InferAndTryRun``."""
        if self.op_type is None:
            raise OpBuildError(f"{self.what}: call Op(op_type_name) before Build()")
        opdef = self._opdef()
        self.inputs = [(self._input_name(opdef, name), blobs) for name, blobs in self.inputs]
        for name, _ in self.inputs:  # names given before Op() are checked now
            self._check_name("input", name, opdef.legacy.input_names)
        if len({name for name, _ in self.inputs}) != len(self.inputs):
            raise OpBuildError(f"{self.what}: an input is given twice (under its name and its legacy name): "
                               f"{', '.join(name for name, _ in self.inputs)}")
        for name in self.attrs:
            self._check_name("attribute", name, opdef.legacy.attr_names)
        return UserOp(self)

    # internals ---------------------------------------------------------------
    def _opdef(self) -> OpDef:
        ops = self._builder.registries.ops
        assert self.op_type is not None  # callers check it
        try:
            return ops.resolve(self.op_type)
        except FlowjobError as exc:
            close = difflib.get_close_matches(self.op_type, [op.name for op in ops], n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise OpBuildError(f"{self.what}: {exc}{hint}") from None

    @staticmethod
    def _input_name(opdef: OpDef, name: str) -> str:
        """``name``, or the record's name for the input an earlier legacy version called ``name``."""
        return dict(opdef.legacy.legacy_input_names).get(name, name)

    def _check_name(self, kind: str, name: str, known: tuple[str, ...] | None) -> None:
        if known is not None and name not in known:
            raise OpBuildError(f"{self.what}: op {self.op_type!r} has no {kind} {name!r}; its {kind}s: "
                               f"{', '.join(known) or 'none'}")

    def ordered_inputs(self) -> list[Blob]:
        names = self._opdef().legacy.input_names
        if names is None:
            return [blob for _, blobs in self.inputs for blob in blobs]
        given = dict(self.inputs)
        return [blob for name in names for blob in given.get(name, [])]

    def add_node(self) -> tuple[Blob, ...]:
        builder: JobBuilder = self._builder
        inputs = self.ordered_inputs()
        for blob in inputs:
            if isinstance(blob, Blob) and blob.builder.job is not builder.job:
                raise OpBuildError(f"{self.what}: input {blob.lbn!r} belongs to job {blob.builder.job.name!r}")
        assert self.op_type is not None  # Build() checked it
        outs = builder.add_op(self.op_type, inputs, self.attrs, name=self.op_name, source=self._source)
        declared = sum(num for _, num in self.outputs)
        if self.outputs and declared != len(outs):
            names = ", ".join(f"{name}={num}" for name, num in self.outputs)
            raise OpBuildError(f"{self.what}: Output calls declare {declared} output(s) ({names}), "
                               f"the op has {len(outs)}")
        return outs


class BuiltinOp:
    """Legacy v0.4's ``flow.builtin_op(op_type_name)``: an op declared once, by its argument names, and called
    like a function on blobs: ``relu = flow.builtin_op("relu").Input("x").Output("y").Build()``, then
    ``y = relu(x)[0]`` inside a job body (legacy ran it eagerly; here each call adds a node of the registered
    record, with its inference, gradient and kernel, as ``flow.user_op_builder`` does)."""

    def __init__(self, op_type_name: str, op_name: str | None = None) -> None:
        if not isinstance(op_type_name, str) or not op_type_name:
            raise OpBuildError(f"flow.builtin_op: op_type_name must be a non-empty str, got {op_type_name!r}")
        if op_name is not None and (not isinstance(op_name, str) or not op_name):
            raise OpBuildError(f"flow.builtin_op({op_type_name!r}): op_name must be a non-empty str or None")
        self.op_type_name = op_type_name
        self.op_name = op_name
        self.inputs: list[tuple[str, int]] = []
        self.outputs: list[tuple[str, int]] = []
        self.attrs: dict[str, Any] = {}
        self._built = False

    def _count(self, kind: str, name: str, num: int) -> tuple[str, int]:
        if not isinstance(name, str) or not name:
            raise OpBuildError(f"flow.builtin_op({self.op_type_name!r}): an {kind} name must be a non-empty str, "
                               f"got {name!r}")
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise OpBuildError(f"flow.builtin_op({self.op_type_name!r}): {kind} {name!r} needs num >= 1, got {num!r}")
        return name, num

    def Input(self, input_name: str, num: int = 1) -> "BuiltinOp":  # noqa: N802 (legacy method names)
        """Declare ``num`` blobs under input ``input_name``; calls take the blobs in declaration order."""
        self.inputs.append(self._count("input", input_name, num))
        return self

    def Output(self, output_name: str, num: int = 1) -> "BuiltinOp":  # noqa: N802
        """Declare ``num`` outputs under ``output_name`` (they must add up to the op's outputs)."""
        self.outputs.append(self._count("output", output_name, num))
        return self

    def Attr(self, attr_name: str, attr_value: Any, attr_type_name: str | None = None) -> "BuiltinOp":  # noqa: N802
        """Set an attribute for every call (``attr_type_name`` was deprecated in v0.4 and is not needed)."""
        if not isinstance(attr_name, str) or not attr_name:
            raise OpBuildError(f"flow.builtin_op({self.op_type_name!r}): an attribute name must be a non-empty "
                               f"str, got {attr_name!r}")
        self.attrs[attr_name] = attr_value
        return self

    def Build(self) -> "BuiltinOp":  # noqa: N802
        """Finish the declaration; the op is then called on blobs."""
        self._built = True
        return self

    @property
    def op(self) -> "BuiltinOp":
        """Legacy's handle to the built op: the op itself."""
        return self.Build()

    def __call__(self, *blobs: Blob) -> tuple[Blob, ...]:
        if not self._built:
            raise OpBuildError(f"flow.builtin_op({self.op_type_name!r}): call Build() before calling the op")
        declared = sum(num for _, num in self.inputs)
        if len(blobs) != declared:
            raise OpBuildError(f"flow.builtin_op({self.op_type_name!r}) takes {declared} blob(s) "
                               f"({', '.join(f'{n}={k}' for n, k in self.inputs) or 'no inputs'}), got {len(blobs)}")
        conf = UserOpConfBuilder(self.op_name or naming.unique_name(self.op_type_name))
        conf.Op(self.op_type_name)
        start = 0
        for name, num in self.inputs:
            conf.Input(name, list(blobs[start:start + num]))
            start += num
        for name, num in self.outputs:
            conf.Output(name, num)
        for name, value in self.attrs.items():
            conf.Attr(name, value)
        return conf.Build().InferAndTryRun().RemoteBlobList()


def builtin_op(op_type_name: str, op_name: str | None = None) -> BuiltinOp:
    """Legacy v0.4 ``flow.builtin_op``: declare a registered op by type and argument names, call it on blobs."""
    return BuiltinOp(op_type_name, op_name)


def user_op_builder(op_name: str) -> UserOpConfBuilder:
    """Legacy ``flow.user_op_builder(op_name)``: configure an op of any registered type by name."""
    return UserOpConfBuilder(op_name)


def consistent_user_op_builder(op_name: str) -> UserOpConfBuilder:
    """Legacy ``flow.consistent_user_op_builder``: the same builder (a job's view decides placement here)."""
    return UserOpConfBuilder(op_name)


class _UserOpModule:
    """``builder.user_op_module``: legacy's handle to the op's kernel object, which kept state between calls."""

    def __init__(self, op_type_name: str) -> None:
        self.op_type_name = op_type_name

    def InitOpKernel(self) -> None:  # noqa: N802 (legacy name)
        """Nothing to make: a record's kernel is built by the planner, once per node, from its inputs."""


class UserOpModuleBuilder:
    """Legacy ``flow.user_op_module_builder(op_type_name)``: an op declared once (``InputSize``, ``Output``,
    ``Attr``), then added per call with ``OpName(...).Input(...).Build().InferAndTryRun()``.

    Legacy kept one C++ kernel object, with whatever state it held, across the calls; records here keep no
    kernel state (an op that does keeps it in variables it mutates), so each call adds a node of the
    registered record as ``flow.user_op_builder`` does."""

    def __init__(self, op_type_name: str) -> None:
        if not isinstance(op_type_name, str) or not op_type_name:
            raise OpBuildError(f"flow.user_op_module_builder: op_type_name must be a non-empty str, "
                               f"got {op_type_name!r}")
        self.op_type_name = op_type_name
        self.user_op_module = _UserOpModule(op_type_name)
        self._sizes: dict[str, int] = {}
        self._outputs: list[tuple[str, int]] = []
        self._attrs: dict[str, Any] = {}
        self._op_name: str | None = None
        self._inputs: list[tuple[str, list[Blob]]] = []

    @property
    def what(self) -> str:
        return f"flow.user_op_module_builder({self.op_type_name!r})"

    def InputSize(self, input_name: str, input_blob_size: int) -> "UserOpModuleBuilder":  # noqa: N802
        """Declare how many blobs each call gives input ``input_name``."""
        if isinstance(input_blob_size, bool) or not isinstance(input_blob_size, int) or input_blob_size < 1:
            raise OpBuildError(f"{self.what}: InputSize({input_name!r}, ...) needs an int >= 1, "
                               f"got {input_blob_size!r}")
        self._sizes[input_name] = input_blob_size
        return self

    def Output(self, output_name: str, num: int = 1) -> "UserOpModuleBuilder":  # noqa: N802
        """Declare ``num`` outputs under ``output_name`` for every call."""
        self._outputs.append((output_name, num))
        return self

    def Attr(self, attr_name: str, attr_value: Any, attr_type_name: str | None = None) -> "UserOpModuleBuilder":  # noqa: N802
        """Set an attribute for every call."""
        self._attrs[attr_name] = attr_value
        return self

    def OpName(self, op_name: str) -> "UserOpModuleBuilder":  # noqa: N802
        """The name of the node the next ``Build`` adds."""
        if not isinstance(op_name, str) or not op_name:
            raise OpBuildError(f"{self.what}: OpName needs a non-empty str, got {op_name!r}")
        self._op_name = op_name
        return self

    def Input(self, input_name: str, input_blob_list: Sequence[Blob]) -> "UserOpModuleBuilder":  # noqa: N802
        """This call's blobs for input ``input_name`` (as many as ``InputSize`` declared)."""
        blobs: list[Blob] = list(input_blob_list)
        if input_name in self._sizes and len(blobs) != self._sizes[input_name]:
            raise OpBuildError(f"{self.what}: input {input_name!r} was declared with InputSize "
                               f"{self._sizes[input_name]}, got {len(blobs)} blob(s)")
        self._inputs.append((input_name, blobs))
        return self

    def Build(self) -> UserOp:  # noqa: N802
        """This call's op, to ``InferAndTryRun``; the next call starts from the declaration again."""
        if self._op_name is None:
            raise OpBuildError(f"{self.what}: call OpName(name) before Build(), one name per call")
        missing = [name for name in self._sizes if name not in dict(self._inputs)]
        if missing:
            raise OpBuildError(f"{self.what}: op {self._op_name!r} got no blobs for input(s) {missing}")
        conf = UserOpConfBuilder(self._op_name).Op(self.op_type_name)
        for name, blobs in self._inputs:
            conf.Input(name, blobs)
        for name, num in self._outputs:
            conf.Output(name, num)
        for name, value in self._attrs.items():
            conf.Attr(name, value)
        self._op_name, self._inputs = None, []
        return conf.Build()


def user_op_module_builder(op_type_name: str) -> UserOpModuleBuilder:
    """Legacy ``flow.user_op_module_builder``: a registered op declared once and added per call."""
    return UserOpModuleBuilder(op_type_name)


def consistent_user_op_module_builder(op_type_name: str) -> UserOpModuleBuilder:
    """Legacy ``flow.consistent_user_op_module_builder``: the same builder (a job's view decides placement)."""
    return UserOpModuleBuilder(op_type_name)


__all__ = ["BuiltinOp", "UserOp", "UserOpConfBuilder", "UserOpModuleBuilder", "builtin_op",
           "consistent_user_op_builder", "consistent_user_op_module_builder", "user_op_builder",
           "user_op_module_builder"]
